//! [`ConfigPatch`] (feature `serde`): a configuration file that changes only the keys it
//! names. The keys themselves are listed once, in `super::keys`; how one key's value is
//! read and written, in `super::text`.

use std::fmt;

use serde::{
    de::{self, Deserializer, MapAccess, Visitor},
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
/// use breaker::{Breaker, Config};
/// # // `breaker::ConfigPatch` (feature `serde`): the facade's feature is off when only the
/// # // runtime's doctests run.
/// # use breaker_runtime::ConfigPatch;
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
