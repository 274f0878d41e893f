//! [`ConfigPatch`] (feature `serde`): a configuration file that changes only the keys it
//! names; and how one key's value is read and written (shared with `Config`'s own form,
//! `super::serde`). The keys themselves are listed once, in `super::keys`.

use std::{fmt, marker::PhantomData, time::Duration};

use serde::{
    de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor},
    ser::{SerializeMap, Serializer},
    Deserialize, Serialize,
};

use super::{keys::Keys, Config, ConfigError};

/// A configuration file that changes only the keys it names (feature `serde`): the same flat
/// keys as [`Config`]'s serde form, every one optional, unknown keys refused, a value of the
/// wrong type refused naming its key (`"cool_off": 5`: `cool_off` wants a duration string
/// like "10s").
///
/// [`Breaker::apply`](crate::Breaker::apply) (and [`Handle::apply`](crate::Handle::apply),
/// [`KeyedBreaker::apply`](crate::KeyedBreaker::apply)) takes the configuration in force,
/// changes the keys the patch names, validates the result as a whole and puts it in force
/// as [`reconfigure`](crate::Breaker::reconfigure) does. Every key it does not name keeps
/// its value in force: an attribute's `timeout`, `retry`, `backoff`, its `probe` and its
/// `on_state_change` hook stay. Reading a [`Config`] from the same file, by contrast, gives
/// every key it does not name its default (and `reconfigure` with it drops them).
///
/// To take a key off (back to its default: no `timeout`, no bulkhead, the default
/// `cool_off`), write it as `null`. `window_calls: null` takes off a count window (a time
/// window is left as it is), and `window_duration: null` a time window.
///
/// Patches applied at once from several threads are applied one after the other, each to
/// the result of the one before: neither loses the other's keys.
///
/// ```
/// use std::time::Duration;
/// use breaker::{Breaker, Config, ConfigPatch};
///
/// let search = Breaker::new(
///     "docs::patch",
///     Config::default().threshold(5).timeout(Duration::from_millis(300)).dry_run(true),
/// );
/// let patch: ConfigPatch = serde_json::from_str(r#"{ "dry_run": false, "cool_off": "5s" }"#).unwrap();
/// search.apply(&patch).unwrap();
/// let now = search.config().values();
/// assert_eq!((now.dry_run, now.cool_off), (false, Duration::from_secs(5)));
/// assert_eq!(now.timeout, Some(Duration::from_millis(300)), "not named: kept");
///
/// let off: ConfigPatch = serde_json::from_str(r#"{ "timeout": null }"#).unwrap();
/// search.apply(&off).unwrap();
/// assert_eq!(search.config().values().timeout, None);
///
/// let typo = serde_json::from_str::<ConfigPatch>(r#"{ "cool_off": 5 }"#).unwrap_err();
/// assert!(typo.to_string().contains(r#"`cool_off`: invalid type: integer `5`, expected a duration string like "10s""#));
/// let bad: ConfigPatch = serde_json::from_str(r#"{ "threshold": 0 }"#).unwrap();
/// assert_eq!(search.apply(&bad).unwrap_err().field(), "threshold");
/// ```
#[derive(Clone, Default, PartialEq, Debug)]
pub struct ConfigPatch {
    keys: Keys,
}

impl ConfigPatch {
    /// `config` with the keys this patch names changed, validated as a whole (what
    /// [`Breaker::apply`](crate::Breaker::apply) puts in force); `config`'s hook and probe
    /// are kept.
    pub fn applied_to(&self, config: &Config) -> Result<Config, ConfigError> {
        super::keys::one_window(&self.keys)?;
        let mut next = config.clone();
        self.keys.set_in(&mut next);
        next.validate()?;
        Ok(next)
    }

    /// The keys this patch names (given a value or `null`), in the order of `Config`'s keys.
    pub fn keys(&self) -> Vec<&'static str> {
        self.keys.named()
    }

    /// Whether it names no key (applying it changes nothing).
    pub fn is_empty(&self) -> bool {
        self.keys.named().is_empty()
    }

    /// The keys as read (for `Config`'s own form).
    pub(super) fn into_keys(self) -> Keys {
        self.keys
    }
}

impl<'de> Deserialize<'de> for ConfigPatch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = ConfigPatch;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of breaker configuration keys")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ConfigPatch, A::Error> {
                let mut keys = Keys::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if !keys.read(&key, &mut map)? {
                        return Err(de::Error::unknown_field(&key, super::keys::KEYS));
                    }
                }
                Ok(ConfigPatch { keys })
            }
        }
        d.deserialize_map(Entries)
    }
}

/// Written as read: the keys it names, `null` for those it takes off.
impl Serialize for ConfigPatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        self.keys.write(&mut map)?;
        map.end()
    }
}

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

/// `Config`'s form writes through the same keys (`super::serde`).
pub(crate) fn write_config<S: Serializer>(config: &Config, s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(None)?;
    Keys::of(config).write(&mut map)?;
    map.end()
}
