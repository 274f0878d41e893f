//! A breaker's name: shared, not leaked.
//!
//! Part one interned every name for the life of the process, so that errors could carry a
//! `&'static str`. Names built per host or per tenant made that a leak; a [`Name`] is an
//! `Arc<str>` instead: cloning it into an error is one reference-count increment and never
//! allocates, and the text is freed with the last breaker, handle and error that name it.

use std::{borrow::Borrow, fmt, ops::Deref, sync::Arc};

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
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<str>);

impl Name {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(all(test, not(breaker_loom)))]
impl Name {
    /// Whether the two are one allocation (clones), not only the same text.
    pub(crate) fn same_allocation(&self, other: &Name) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name(Arc::from(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Name(Arc::from(s))
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        *self == *other.0
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}
