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

use std::{borrow::Borrow, cmp::Ordering, fmt, hash::Hash, ops::Deref, sync::Arc};

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
}
