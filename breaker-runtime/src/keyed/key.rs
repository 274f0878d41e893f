//! What keys a [`KeyedBreaker`](super::KeyedBreaker): [`BreakerKey`], the borrowed forms a
//! lookup takes ([`KeyArg`]), and a key's breaker name.

use std::{
    borrow::{Borrow, Cow},
    fmt::{self, Write as _},
    hash::Hash,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
};

use crate::Name;

/// A type that can key a [`KeyedBreaker`](crate::KeyedBreaker): `String`, the integers, `IpAddr`, `SocketAddr`,
/// `http::uri::Authority` (with feature `http`), a pair of those, or your own type.
///
/// The map stores keys of this type and looks them up by a borrowed form as `HashMap::get`
/// does (`&Q` where `K: Borrow<Q>`): a `KeyedBreaker<String>` is called with a `&str`, and an
/// existing key's lookup allocates nothing. [`fmt_key`](Self::fmt_key) writes the key into
/// its breaker's name, `{name}[{key}]`.
///
/// **Memory.** A `String` key longer than 256 bytes is kept in the map as its name shows it,
/// its first 16 bytes and 32 hex digits of its SHA-256 (52 bytes), never as the caller's
/// bytes; a pair keeps each of its parts so. A key type of your own is kept as it is: it
/// owns its memory, so a key built from a caller's input should bound its size itself (a
/// long key's *name* is bounded whatever its type).
///
/// Your own key type:
///
/// ```
/// use std::fmt;
/// use breaker::{BreakerKey, Config, KeyedBreaker};
///
/// #[derive(Clone, PartialEq, Eq, Hash)]
/// struct Tenant(u32);
///
/// impl BreakerKey for Tenant {
///     fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         write!(f, "tenant-{}", self.0)
///     }
/// }
///
/// let db = KeyedBreaker::<Tenant>::new("docs::tenant_db", Config::default());
/// assert_eq!(db.breaker(&Tenant(7)).name(), "docs::tenant_db[tenant-7]");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot key a circuit breaker",
    label = "this key's type is `{Self}`",
    note = "keys are `&str`, `String`, integers, `IpAddr`, `SocketAddr`, `http::uri::Authority` (feature `http`) and pairs of those; for another type implement `breaker::BreakerKey` (see its docs)"
)]
pub trait BreakerKey: Hash + Eq + Send + Sync + 'static {
    /// Writes the key as it appears in the breaker's name `{name}[{key}]`.
    fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// The form a keyed breaker keeps of a new key: the key itself, except a `String`
    /// longer than 256 bytes, kept as the prefix and
    /// digest its name shows (`bounded_key`), and a pair, kept as its parts are. A key type
    /// of your own is kept as it is: leave this alone.
    #[doc(hidden)]
    fn into_kept(self) -> Self
    where
        Self: Sized,
    {
        self
    }
}

/// Keys shown with `Display`.
macro_rules! display_keys {
    ($($t:ty),* $(,)?) => {$(
        impl BreakerKey for $t {
            fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    )*};
}

display_keys!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, bool, char, IpAddr, Ipv4Addr,
    Ipv6Addr, SocketAddr,
);

#[cfg(feature = "http")]
display_keys!(http::uri::Authority);

/// A `String` over 256 bytes is kept as its bounded
/// form: a caller's 60 KB key costs the map what a short one does.
impl BreakerKey for String {
    fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }

    fn into_kept(self) -> String {
        if self.len() <= crate::name::LONGEST_KEY {
            return self;
        }
        crate::name::bounded_key(&self).into_owned()
    }
}

/// A pair keys as `a:b`, say `(host, port)` as `example.com:443`, with any `:` and `\` of
/// `a` escaped (`\:`, `\\`): the first unescaped `:` ends `a`, so two different pairs never
/// share a name (`("x:y", "z")` is `x\:y:z`, `("x", "y:z")` is `x:y:z`).
impl<A: BreakerKey, B: BreakerKey> BreakerKey for (A, B) {
    fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(EscapeSeparator(f), "{}", KeyText(&self.0))?;
        f.write_str(":")?;
        self.1.fmt_key(f)
    }

    fn into_kept(self) -> Self {
        (self.0.into_kept(), self.1.into_kept())
    }
}

/// A key as its text (`fmt_key`).
struct KeyText<'a, K>(&'a K);

impl<K: BreakerKey> fmt::Display for KeyText<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt_key(f)
    }
}

/// Writes through with `:` and `\` escaped by a `\`.
struct EscapeSeparator<'a, W>(&'a mut W);

impl<W: fmt::Write> fmt::Write for EscapeSeparator<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(at) = rest.find([':', '\\']) {
            self.0.write_str(&rest[..at])?;
            self.0.write_char('\\')?;
            self.0.write_str(&rest[at..at + 1])?;
            rest = &rest[at + 1..];
        }
        self.0.write_str(rest)
    }
}

/// What `key = <expr>` of the attribute evaluates to, and how it finds its breaker: the
/// stored key type, and the borrowed form a lookup takes. Implemented for the key types,
/// their references, and `&str`/`String` (stored as `String`, looked up as `str`). A pair
/// is looked up by its owned form (a pair holding a `&str` makes a `String` per call).
#[doc(hidden)]
pub trait KeyArg {
    /// What the map stores.
    type Key: BreakerKey + Borrow<Self::Lookup>;
    /// What a lookup borrows.
    type Lookup: ?Sized + Hash + Eq + ToOwned<Owned = Self::Key>;
    /// The borrowed form of this key.
    fn lookup(&self) -> Cow<'_, Self::Lookup>;
}

impl<T: KeyArg + ?Sized> KeyArg for &T {
    type Key = T::Key;
    type Lookup = T::Lookup;
    fn lookup(&self) -> Cow<'_, T::Lookup> {
        (**self).lookup()
    }
}

impl KeyArg for str {
    type Key = String;
    type Lookup = str;
    fn lookup(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl KeyArg for String {
    type Key = String;
    type Lookup = str;
    fn lookup(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.as_str())
    }
}

macro_rules! self_keyed {
    ($($t:ty),* $(,)?) => {$(
        impl KeyArg for $t {
            type Key = $t;
            type Lookup = $t;
            fn lookup(&self) -> Cow<'_, $t> {
                Cow::Borrowed(self)
            }
        }
    )*};
}

self_keyed!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, bool, char, IpAddr, Ipv4Addr,
    Ipv6Addr, SocketAddr,
);

#[cfg(feature = "http")]
self_keyed!(http::uri::Authority);

impl<A: KeyArg, B: KeyArg> KeyArg for (A, B)
where
    (A::Key, B::Key): Clone,
{
    type Key = (A::Key, B::Key);
    type Lookup = (A::Key, B::Key);
    fn lookup(&self) -> Cow<'_, Self::Key> {
        let a = self.0.lookup().into_owned();
        let b = self.1.lookup().into_owned();
        Cow::Owned((a, b))
    }
}

/// A key's breaker name: `{name}[{key}]`, or `{name}[{prefix}…#{digest}]` for a key whose
/// text is longer than 256 bytes (its first 16 bytes
/// at most, and 32 hex digits of the SHA-256 of all of it).
pub(super) struct KeyName<'a, K>(pub(super) &'a str, pub(super) &'a K);

impl<K: BreakerKey> KeyName<'_, K> {
    /// The name, in one allocation when it fits 128 bytes: written on the stack first (a
    /// new key's name used to cost a growing `String` and then its copy into the `Name`).
    pub(super) fn to_name(&self) -> Name {
        let mut buf = StackStr {
            bytes: [0; 128],
            len: 0,
        };
        if fmt::write(&mut buf, format_args!("{self}")).is_ok()
            && let Ok(s) = std::str::from_utf8(&buf.bytes[..buf.len])
        {
            return Name::from(s);
        }
        let mut text = crate::name::Bounded::default();
        let _ = write!(text, "{}", KeyText(self.1));
        Name::from(format!("{}[{}]", self.0, text.shown()))
    }
}

/// A string on the stack; writing past its end fails.
struct StackStr {
    bytes: [u8; 128],
    len: usize,
}

impl fmt::Write for StackStr {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let to = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        to.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl<K: BreakerKey> fmt::Display for KeyName<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)?;
        f.write_str("[")?;
        self.1.fmt_key(f)?;
        f.write_str("]")
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;
    use crate::{Config, KeyedBreaker};

    #[test]
    fn a_long_string_is_kept_as_its_prefix_and_digest() {
        let short = "s".repeat(crate::name::LONGEST_KEY);
        assert_eq!(
            short.clone().into_kept(),
            short,
            "up to 256 bytes, as it is"
        );
        let long = |tail: &str| format!("{}{tail}", "l".repeat(1_000));
        let kept = long("a").into_kept();
        assert_eq!(kept, crate::name::bounded_key(&long("a")));
        assert_eq!(kept.len(), 16 + "…#".len() + 32);
        assert_eq!(kept.clone().into_kept(), kept, "kept once for all");
        assert_ne!(
            kept,
            long("b").into_kept(),
            "the digest covers the whole key"
        );
        let pair = (long("a"), 443u16).into_kept();
        assert_eq!(pair, (kept, 443));
    }

    /// A pair holding a long host is found again by the caller's form, with one breaker.
    #[test]
    fn a_pair_with_a_long_part_is_one_breaker() {
        let k = KeyedBreaker::<(String, u16)>::new("key::long_pair", Config::default());
        let key = ("h".repeat(10_000), 443);
        let a = k.breaker(&key);
        assert!(k.contains(&key));
        assert!(a.handle().same_breaker(&k.breaker(&key).handle()));
        assert_eq!(k.len(), 1);
        let (entries, _) = k.entries();
        assert_eq!(entries[0].0 .0.len(), 52, "kept bounded");
        assert!(
            a.name().starts_with("key::long_pair[hhhhhhhhhhhhhhhh…#"),
            "{}",
            a.name()
        );
    }
}
