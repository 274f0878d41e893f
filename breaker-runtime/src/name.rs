//! A breaker's name: shared, not leaked.
//!
//! Part one interned every name for the life of the process, so that errors could carry a
//! `&'static str`. Names built per host or per tenant made that a leak; a [`Name`] is an
//! `Arc<str>` instead: cloning it into an error is one reference-count increment and never
//! allocates, and the text is freed with the last breaker, handle and error that name it.
//!
//! The attribute's names are string literals (`concat!(module_path!(), "::", fn)`), so
//! those are kept as `&'static` text: copying one into a refusal is a plain copy, not two
//! atomic read-modify-writes (the count up at the refusal, down when the error is dropped),
//! which were most of what a refusal cost beyond its clock read. Both forms are 16 bytes: a
//! static name is a thin pointer to its `&'static str`, stored where the count's null
//! pointer would be.
//!
//! [`Breaker::new`](crate::Breaker::new)'s names are kept the same way, within a bound
//! ([`Name::kept`]): the first [`KEPT_BYTES`] of distinct names a process gives it stay for
//! its life, so a service's few named breakers refuse without a count (45 → 34 ns an async
//! refusal here, `benches/RESULTS.md`), and one that makes a breaker per tenant keeps at most
//! that much: the names past the bound are counted, as before. A keyed breaker's per-key
//! names are never kept (their keys are the callers').

use std::{
    borrow::{Borrow, Cow},
    cmp::Ordering,
    collections::BTreeMap,
    fmt::{self, Write as _},
    hash::Hash,
    ops::Deref,
    sync::{Arc, Mutex, PoisonError},
};

/// The name of a breaker, as errors, transitions and the registry carry it.
///
/// Reads like a `&str`: it derefs to one, compares with one and displays as one.
///
/// ```
/// use breaker::{Breaker, Config};
/// let b = Breaker::new("docs::name", Config::default());
/// b.handle().force_open();
/// let err = b.call_sync(|| Ok::<(), ()>(())).unwrap_err().into_breaker().unwrap();
/// assert_eq!(err.name(), "docs::name");
/// ```
#[derive(Clone)]
pub struct Name(Repr);

#[derive(Clone)]
enum Repr {
    Counted(Arc<str>),
    Static(&'static &'static str),
}

impl Name {
    /// The name as a string slice.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Counted(text) => text,
            Repr::Static(text) => text,
        }
    }

    /// A name of static text, copied without a reference count (the attribute's names:
    /// `Name::from_static(&concat!(…))`, a promoted constant).
    #[doc(hidden)]
    pub const fn from_static(text: &'static &'static str) -> Name {
        Name(Repr::Static(text))
    }

    /// Whether copies of it cost no reference count.
    pub(crate) fn is_static(&self) -> bool {
        matches!(self.0, Repr::Static(_))
    }

    /// A name made at run time, kept for the process while the names kept so far total under
    /// [`KEPT_BYTES`] (then a copy costs no count), else counted. The same text is kept once.
    /// `O(log n)` in the names kept, under a lock: made when a breaker is, never on a call.
    pub(crate) fn kept(text: &str) -> Name {
        static KEPT: Mutex<Kept> = Mutex::new(Kept::new(KEPT_BYTES));
        let kept = KEPT
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keep(text);
        match kept {
            Some(name) => Name(Repr::Static(name)),
            None => Name::from(text),
        }
    }
}

/// How many bytes of names [`Name::kept`] keeps for the life of the process, its own
/// bookkeeping included: about a thousand names of 30 characters.
pub(crate) const KEPT_BYTES: usize = 64 * 1024;

/// What one kept name costs beside its text: its `&str` (16 bytes, boxed) and its entry in
/// the map (a key and a value, 24 bytes, in a node shared with ten others).
const KEPT_ENTRY: usize = 48;

/// The names kept so far, by their text, within `limit` bytes.
struct Kept {
    names: BTreeMap<&'static str, &'static &'static str>,
    bytes: usize,
    limit: usize,
}

impl Kept {
    const fn new(limit: usize) -> Kept {
        Kept {
            names: BTreeMap::new(),
            bytes: 0,
            limit,
        }
    }

    /// The text kept (once), or `None` past the limit.
    fn keep(&mut self, text: &str) -> Option<&'static &'static str> {
        if let Some(&name) = self.names.get(text) {
            return Some(name);
        }
        let cost = text.len() + KEPT_ENTRY;
        if self.bytes + cost > self.limit {
            return None;
        }
        self.bytes += cost;
        let text: &'static str = Box::leak(Box::from(text));
        let name: &'static &'static str = Box::leak(Box::new(text));
        self.names.insert(text, name);
        Some(name)
    }
}

#[cfg(all(test, not(breaker_loom)))]
impl Name {
    /// Whether the two are one allocation (clones), not only the same text.
    pub(crate) fn same_allocation(&self, other: &Name) -> bool {
        match (&self.0, &other.0) {
            (Repr::Counted(a), Repr::Counted(b)) => Arc::ptr_eq(a, b),
            (Repr::Static(a), Repr::Static(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name(Repr::Counted(Arc::from(s)))
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Self {
        Name::from(s.as_str())
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Name(Repr::Counted(Arc::from(s)))
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        *self == *other.as_str()
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.as_str()
    }
}

/// The longest key text a name shows whole: a longer key is named by a prefix of it and a
/// digest of all of it, so a key's breaker costs the same whatever its caller sends (a
/// 60 KB host name cost its name 60 KB, its registry entry and every event of it as much).
pub const LONGEST_KEY: usize = 256;

/// How much of a longer key its name shows.
const PREFIX: usize = 16;

/// Bytes of a longer key's SHA-256 its name shows (in hex): 128 bits, since a keyed map
/// keeps a long key by it, and two keys of one digest would share a breaker (a birthday
/// search finds such a pair in 2^64 tries here, in 2^32 with 64 bits).
const DIGEST: usize = 16;

/// A key's text as a name shows it and a keyed breaker keeps it: whole up to
/// [`LONGEST_KEY`] bytes, else a prefix and a digest (`bounded_key("a".repeat(300))` is
/// `aaaaaaaaaaaaaaaa…#` and 32 hex digits, 52 bytes). The one bounding of keys: the map
/// keeps a `String` key in this form, the HTTP integrations key by it, and a name shows it.
#[doc(hidden)]
pub fn bounded_key(key: &str) -> Cow<'_, str> {
    if key.len() <= LONGEST_KEY {
        return Cow::Borrowed(key);
    }
    let mut text = Bounded::default();
    let _ = text.write_str(key);
    Cow::Owned(text.shown().into_owned())
}

/// A key's text, kept up to [`LONGEST_KEY`] bytes (whole characters), digested whole.
#[derive(Default)]
pub(crate) struct Bounded {
    head: String,
    len: usize,
    digest: Option<crate::digest::Sha256>,
}

impl Bounded {
    pub(crate) fn shown(&self) -> Cow<'_, str> {
        if self.len <= LONGEST_KEY {
            return Cow::Borrowed(&self.head);
        }
        let mut end = PREFIX.min(self.head.len());
        while !self.head.is_char_boundary(end) {
            end -= 1;
        }
        let digest = self.digest.clone().map(|d| d.finish()).unwrap_or_default();
        let mut shown = String::with_capacity(end + "…#".len() + 2 * DIGEST);
        shown.push_str(&self.head[..end]);
        shown.push_str("…#");
        for b in &digest[..DIGEST] {
            let _ = write!(shown, "{b:02x}");
        }
        Cow::Owned(shown)
    }
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.digest
            .get_or_insert_with(crate::digest::Sha256::new)
            .update(s.as_bytes());
        // Whole characters, and none after the first that did not fit.
        let complete = self.head.len() == self.len;
        self.len += s.len();
        if complete {
            for c in s.chars() {
                if self.head.len() + c.len_utf8() > LONGEST_KEY {
                    break;
                }
                self.head.push(c);
            }
        }
        Ok(())
    }
}

/// A name as log lines show it: control, bidirectional and invisible characters written as
/// `\u{…}` escapes, so a key cannot forge a log line (a newline), reverse the text around it
/// (`\u{202E}`) or pass for another name (`\u{200B}`). The dashboard's page escapes the same
/// characters.
pub(crate) struct Escaped<'a>(pub(crate) &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some((at, c)) = rest.char_indices().find(|(_, c)| hidden(*c)) {
            f.write_str(&rest[..at])?;
            write!(f, "\\u{{{:X}}}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

/// Control, bidirectional-formatting and invisible characters (the page's `HIDDEN` too).
fn hidden(c: char) -> bool {
    matches!(
        u32::from(c),
        0..=0x1f
            | 0x7f..=0x9f
            | 0xad
            | 0x34f
            | 0x61c
            | 0x115f
            | 0x1160
            | 0x17b4
            | 0x17b5
            | 0x180b..=0x180f
            | 0x200b..=0x200f
            | 0x2028..=0x202e
            | 0x2060..=0x206f
            | 0x3164
            | 0xfe00..=0xfe0f
            | 0xfeff
            | 0xffa0
            | 0xfff0..=0xfffb
            | 0xe0000..=0xe0fff
    )
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn a_static_name_is_the_same_name_as_a_counted_one_of_its_text() {
        let fixed = Name::from_static(&"app::charge");
        let counted = Name::from("app::charge");
        assert!(fixed.is_static() && !counted.is_static());
        assert_eq!(fixed, counted);
        assert_eq!(fixed.cmp(&counted), Ordering::Equal);
        let h = std::hash::RandomState::new();
        assert_eq!(h.hash_one(&fixed), h.hash_one(&counted));
        assert_eq!(fixed.clone().as_str(), "app::charge");
        assert!(fixed.same_allocation(&fixed.clone()));
        assert_eq!(
            format!("{fixed:>13}|{fixed:?}"),
            "  app::charge|\"app::charge\""
        );
        // Both forms in 16 bytes: the static one sits in the count's null-pointer niche.
        assert_eq!(std::mem::size_of::<Name>(), 16);
    }

    #[test]
    fn a_kept_name_is_kept_once_and_only_within_the_limit() {
        let mut kept = Kept::new(2 * (KEPT_ENTRY + 8));
        let first = kept.keep("tenant-1").expect("room for two");
        assert!(
            std::ptr::eq(first, kept.keep("tenant-1").unwrap()),
            "one copy of a text"
        );
        assert_eq!(*kept.keep("tenant-2").unwrap(), "tenant-2");
        assert_eq!(
            kept.keep("tenant-3"),
            None,
            "past the limit: counted instead"
        );
        assert!(
            kept.keep("tenant-1").is_some(),
            "a kept text is still found"
        );
        assert_eq!(kept.bytes, 2 * (KEPT_ENTRY + 8));

        let name = Name::kept("name::tests::kept");
        assert!(
            name.is_static(),
            "the process's own bound is far from full in a test"
        );
        assert!(name.same_allocation(&Name::kept("name::tests::kept")));
        assert_eq!(name, Name::from("name::tests::kept"));
    }

    #[test]
    fn escaped_shows_what_would_hide_or_forge() {
        let shown = |s: &str| Escaped(s).to_string();
        assert_eq!(shown("shop::inventory"), "shop::inventory");
        assert_eq!(
            shown("caf\u{e9}[\u{4e2d}]"),
            "caf\u{e9}[\u{4e2d}]",
            "letters stay"
        );
        assert_eq!(shown("a\nINFO forged"), "a\\u{A}INFO forged");
        assert_eq!(shown("\u{202E}yrotnevni::pohs"), "\\u{202E}yrotnevni::pohs");
        assert_eq!(shown("shop::inventory\u{200B}"), "shop::inventory\\u{200B}");
        assert_eq!(shown("\u{E0041}\u{FEFF}\r"), "\\u{E0041}\\u{FEFF}\\u{D}");
    }
}
