//! [`Config`] as a configuration file or a control plane writes it (feature `serde`): one
//! flat map whose keys are the builder methods' (and the attribute's) names, durations as
//! humantime strings (`"10s"`, `"600ms"`, `"1m 30s"`), unknown keys refused (a typo must
//! not silently leave a default in force), a value of the wrong type refused naming its key.
//! Reading checks the configuration as [`Breaker::try_new`](crate::Breaker::try_new) would,
//! so a bad file fails where it is read, naming the field. A key absent (or `null`) is the
//! default. The `on_state_change` hook and the `probe` are code: neither written nor read (a
//! configuration read from a file has none, and [`reconfigure`](crate::Breaker::reconfigure)
//! keeps those in force). The keys are `super::keys`'s list, the same as a
//! [`ConfigPatch`](super::ConfigPatch)'s, which changes only the keys it names.

use serde::{ser::SerializeMap, Deserialize, Deserializer, Serialize, Serializer};

use super::{keys, Config, ConfigPatch};

impl Serialize for Config {
    /// Every key with a value; an unset optional key (and `dry_run: false`) is left out.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        keys::Keys::of(self).write(&mut map)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Config {
    /// The configuration the file describes, each key it does not name at its default,
    /// checked as `Breaker::try_new` would.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Config, D::Error> {
        let keys = ConfigPatch::deserialize(d)?.into_keys();
        let read = || {
            keys::one_window(&keys)?;
            let mut c = Config::DEFAULT;
            keys.set_in(&mut c);
            c.validate()?;
            Ok(c)
        };
        read().map_err(|e: super::ConfigError| serde::de::Error::custom(e))
    }
}
