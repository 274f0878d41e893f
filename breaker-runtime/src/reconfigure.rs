//! Changing a running breaker's configuration without losing state: `reconfigure` on
//! [`Breaker`], [`Handle`] and [`KeyedBreaker`](crate::KeyedBreaker). What the call path
//! reads of the configuration in force, and what cannot change, is `crate::live`'s.

use std::sync::Arc;

use crate::{config::Resolved, core::Core, Breaker, Config, ConfigError, Handle};

impl Core {
    /// Puts in force what `next` makes of the configuration in force, for this breaker: the
    /// shared settings, then its own parts, one change at a time (`Live::change`).
    pub(crate) fn change(
        &self,
        next: impl FnOnce(&Config) -> Result<Config, ConfigError>,
    ) -> Result<Arc<Resolved>, ConfigError> {
        self.live
            .change(&self.name, next, |settings| self.adopt(&settings.policy))
    }

    /// Puts `config` in force for this breaker.
    pub(crate) fn reconfigure(&self, config: Config) -> Result<Arc<Resolved>, ConfigError> {
        self.change(|_| Ok(config))
    }
}

/// A key of a keyed breaker follows its keyed breaker: reconfiguring one key alone would
/// change every key (they share one configuration), so it is refused.
fn refuse_key() -> ConfigError {
    ConfigError::new(
        "config",
        "belongs to a keyed breaker's key: reconfigure the `KeyedBreaker`, which changes \
         every key",
    )
}

impl Breaker {
    /// Changes this breaker's configuration while it runs, keeping its state, generation,
    /// [`Stats`](crate::Stats), open deadline and backoff step.
    ///
    /// `config` is validated first: an invalid one changes nothing and the error names the
    /// field. A valid one applies at once to every call admitted after it: a resized count
    /// window keeps its most recent outcomes, a bulkhead's new limit applies to new
    /// admissions (calls in flight keep their slots), a dry run turns on or off. A running
    /// open period keeps its deadline; the next one uses the new cool-off; a new `probes`
    /// applies from the next half-open period. A `config` without an `on_state_change`
    /// hook keeps the hook in force. The overload mechanisms' parameters (`throttle`,
    /// `ramp`, `adaptive_concurrency`) and `max_open_percent` cannot change on a running
    /// breaker: changing one is refused, naming it. A key's breaker from a
    /// [`KeyedBreaker`](crate::KeyedBreaker) is reconfigured through its keyed breaker.
    ///
    /// `config` replaces the configuration in force whole: a key it does not set goes back
    /// to its default (an attribute's `timeout` or `retry` included). To change only some
    /// keys (a configuration file), use `apply` with a `ConfigPatch` (feature `serde`).
    /// Reconfigurations and `apply`s made at once from several threads take effect one after
    /// the other: the last one in force is the one the calls obey. Every change in force
    /// logs one INFO line (target `breaker`) naming the keys changed, old → new.
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// let search = Breaker::new("docs::reconfigure", Config::default().dry_run(true).threshold(1));
    /// let _ = search.call_sync(|| Err::<(), _>("503"));
    /// assert_eq!(search.state(), State::Open); // only pretends to refuse
    /// search.reconfigure(Config::default().threshold(1)).unwrap(); // now it enforces
    /// assert!(search.call_sync(|| Ok::<_, ()>(())).unwrap_err().is_open());
    /// let err = search.reconfigure(Config::default().threshold(0)).unwrap_err();
    /// assert_eq!(err.field(), "threshold");
    /// ```
    pub fn reconfigure(&self, config: Config) -> Result<(), ConfigError> {
        self.handle().reconfigure(config)
    }

    /// Changes the keys `patch` names, keeping every other key in force (an attribute's
    /// `timeout`, `retry`, `backoff`, its probe and hook included): the result is validated
    /// as a whole (an invalid one changes nothing and the error names the field), then put
    /// in force as [`reconfigure`](Self::reconfigure) does. Patches applied at once from
    /// several threads are applied one after the other, none losing another's keys. See
    /// [`ConfigPatch`](crate::ConfigPatch) for the file's form.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config};
    ///
    /// let search = Breaker::new(
    ///     "docs::apply",
    ///     Config::default().dry_run(true).timeout(Duration::from_secs(2)),
    /// );
    /// // A configuration file names only what changes (feature `serde`).
    /// let patch = serde_json::from_str(r#"{ "dry_run": false, "threshold": 3 }"#).unwrap();
    /// search.apply(&patch).unwrap();
    /// let now = search.config().values();
    /// assert!(!now.dry_run);
    /// assert_eq!(now.threshold, Some(3));
    /// assert_eq!(now.timeout, Some(Duration::from_secs(2))); // not named: kept
    /// ```
    #[cfg(feature = "serde")]
    pub fn apply(&self, patch: &crate::ConfigPatch) -> Result<(), ConfigError> {
        self.handle().apply(patch)
    }

    /// The configuration in force (its `on_state_change` hook and probe included), as
    /// [`Handle::config`] gives it: what the calls obey. Its values are read with
    /// [`Config::values`].
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let b = Breaker::new("docs::config", Config::default().threshold(3));
    /// assert_eq!(b.config().values().threshold, Some(3));
    /// b.reconfigure(Config::default().threshold(7)).unwrap();
    /// assert_eq!(b.config().values().threshold, Some(7));
    /// ```
    pub fn config(&self) -> Config {
        self.shared.core.live.config()
    }

    /// Closes the breaker and clears its counts and [`Stats`](crate::Stats), as
    /// [`Handle::reset`] does.
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// let b = Breaker::new("docs::reset", Config::default().threshold(1));
    /// let _ = b.call_sync(|| Err::<(), _>("down"));
    /// assert_eq!(b.state(), State::Open);
    /// b.reset();
    /// assert_eq!(b.state(), State::Closed);
    /// assert_eq!(b.stats().calls, 0);
    /// ```
    pub fn reset(&self) {
        self.handle().reset();
    }
}

impl Handle {
    /// Changes the breaker's configuration while it runs (see [`Breaker::reconfigure`]):
    /// how an attribute's breaker, found in the [`registry`](crate::registry), is
    /// reconfigured.
    pub fn reconfigure(&self, config: Config) -> Result<(), ConfigError> {
        if self.shared.family.is_some() {
            return Err(refuse_key());
        }
        crate::config::refuse_outliers(&config)?;
        let core = &self.shared.core;
        let probe = config.probe.is_some();
        core.reconfigure(config)?;
        if probe {
            // An opening under way gets its probe task now, unless it has one.
            crate::probe::install(&self.shared);
        }
        Ok(())
    }

    /// Changes the keys `patch` names, keeping the others (see [`Breaker::apply`]).
    #[cfg(feature = "serde")]
    pub fn apply(&self, patch: &crate::ConfigPatch) -> Result<(), ConfigError> {
        if self.shared.family.is_some() {
            return Err(refuse_key());
        }
        self.shared.core.change(|config| patch.applied_to(config))?;
        Ok(())
    }

    /// The configuration in force (its `on_state_change` hook included).
    ///
    /// ```
    /// use breaker::{registry, Breaker, Config};
    ///
    /// let _b = Breaker::new("docs::handle_config", Config::default().threshold(4));
    /// let handle = registry().get("docs::handle_config").unwrap();
    /// assert_eq!(handle.config().values().threshold, Some(4));
    /// ```
    pub fn config(&self) -> Config {
        self.shared.core.live.config()
    }
}
