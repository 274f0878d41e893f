//! One key's value in a configuration file (feature `serde`), for [`ConfigPatch`] and
//! `Config`'s own form: numbers and booleans as JSON has them, durations as humantime
//! strings; `null` takes a key off; an error names its key.
//!
//! [`ConfigPatch`]: super::ConfigPatch

use std::{fmt, marker::PhantomData, time::Duration};

use serde::{
    de::{self, DeserializeSeed, Deserializer, Visitor},
    ser::Serializer,
    Deserialize, Serialize,
};

/// How one key's value is read and written in a file.
pub(crate) trait FileValue: Sized {
    /// What a wrong value is told it should be.
    const WANTS: &'static str;
    /// Whether a configuration's file form writes it (`dry_run: false` is left out, as
    /// every unset key is).
    fn written(&self) -> bool {
        true
    }
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
}

macro_rules! plain {
    ($($ty:ty: $wants:literal),*) => {$(
        impl FileValue for $ty {
            const WANTS: &'static str = $wants;
            fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$ty>::deserialize(d)
            }
            fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.serialize(s)
            }
        }
    )*};
}
plain!(u32: "a whole number", usize: "a whole number", f64: "a number");

impl FileValue for bool {
    const WANTS: &'static str = "true or false";
    fn written(&self) -> bool {
        *self
    }
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        bool::deserialize(d)
    }
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize(s)
    }
}

/// A hedge's delay as the attribute writes it: a percentile (`"p95"`, `"p99.9"`) or a
/// duration (`"20ms"`).
impl FileValue for super::HedgeDelay {
    const WANTS: &'static str = "a percentile like \"p95\" or a duration like \"20ms\"";
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = super::HedgeDelay;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(super::HedgeDelay::WANTS)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<super::HedgeDelay, E> {
                let parsed = match s.strip_prefix('p') {
                    Some(p) => p.parse().ok().map(super::HedgeDelay::Percentile),
                    None => humantime::parse_duration(s)
                        .ok()
                        .map(super::HedgeDelay::Fixed),
                };
                parsed.ok_or_else(|| {
                    E::custom(format_args!(
                        "{s:?} is neither a percentile such as \"p95\" nor a duration such as \"20ms\""
                    ))
                })
            }
        }
        d.deserialize_str(Text)
    }
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            super::HedgeDelay::Percentile(p) => s.collect_str(&format_args!("p{p}")),
            super::HedgeDelay::Fixed(d) => s.collect_str(&humantime::format_duration(*d)),
        }
    }
}

/// Durations as humantime strings (`"10s"`, `"600ms"`, `"1m 30s"`), as the attribute takes
/// them.
impl FileValue for Duration {
    const WANTS: &'static str = "a duration string like \"10s\"";
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(Duration::WANTS)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
                humantime::parse_duration(s).map_err(|e| {
                    E::custom(format_args!(
                        "{s:?} is not a duration such as \"10s\" or \"600ms\" ({e})"
                    ))
                })
            }
        }
        d.deserialize_str(Text)
    }
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*self))
    }
}

/// Reads one key's value, `null` as `None`; an error names the key.
pub(crate) struct Seed<T> {
    key: &'static str,
    value: PhantomData<T>,
}

impl<T> Seed<T> {
    pub(crate) fn new(key: &'static str) -> Self {
        Seed {
            key,
            value: PhantomData,
        }
    }
}

impl<'de, T: FileValue> DeserializeSeed<'de> for Seed<T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        struct OrNull<T>(PhantomData<T>);
        impl<'de, T: FileValue> Visitor<'de> for OrNull<T> {
            type Value = Option<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} or null", T::WANTS)
            }
            fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
                T::read(d).map(Some)
            }
        }
        // The deserializer's own message (and a position, if it has one), after the key.
        d.deserialize_option(OrNull(PhantomData))
            .map_err(|e| de::Error::custom(format_args!("`{}`: {e}", self.key)))
    }
}

/// Writes one key's value.
pub(crate) struct Out<T>(pub(crate) T);

impl<T: FileValue> Serialize for Out<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.write(s)
    }
}
