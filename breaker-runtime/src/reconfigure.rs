//! Changing a running breaker's configuration without losing state: `reconfigure` on
//! [`Breaker`], [`Handle`] and [`KeyedBreaker`](crate::KeyedBreaker). What the call path
//! reads of the configuration in force, and what cannot change, is `crate::live`'s.

use crate::{Breaker, Config, ConfigError, Handle};

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
        let settings = core.live.replace(config)?;
        core.adopt(&settings.policy);
        if probe {
            // An opening under way gets its probe task now, unless it has one.
            crate::probe::install(&self.shared);
        }
        Ok(())
    }

    /// The configuration in force (its `on_state_change` hook included).
    pub fn config(&self) -> Config {
        self.shared.core.live.resolved().config.clone()
    }
}
