//! The `outliers` key of [`Config`]: its builder method. The rules, their defaults and
//! checks are [`Outliers`]' (`crate::outliers`).

use crate::{Config, Outliers};

impl Config {
    /// Outlier ejection for a [`KeyedBreaker`](crate::KeyedBreaker) whose keys are
    /// endpoints: every [`interval`](Outliers::interval) each key's success rate is judged
    /// against its peers', and the outliers are opened (cause
    /// [`Cause::Outlier`](crate::Cause::Outlier)) for a time that grows with each ejection,
    /// never more than [`max_ejection_percent`](Outliers::max_ejection_percent) of the keys
    /// at once and nothing new while fewer than half admit. See [`Outliers`] for the rules.
    ///
    /// Detection runs on a tokio task (one per keyed breaker, started with it when a tokio
    /// runtime is current, else at its first new key in one; stopped when it is dropped),
    /// from the counts each key's breaker keeps anyway: the call path pays nothing for it.
    /// In a [`dry_run`](Self::dry_run) it logs "would eject" instead of ejecting. Not for a
    /// plain [`Breaker`](crate::Breaker) (a [`ConfigError`](crate::ConfigError) naming
    /// `outliers`: it has no peers); not written by `serde` yet.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config, KeyedBreaker, Outliers, State};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let config = Config::default().outliers(Outliers::default()); // 10 s, 30 s, 10 %
    /// let endpoints = KeyedBreaker::<String>::new("docs::config_outliers", config.clone());
    /// for second in 0..20u64 {
    ///     for e in 0..20 {
    ///         for call in 0..50u64 {
    ///             // Endpoint 7 fails 8 % of its calls, the others 0.1 %.
    ///             let n = second * 50 + call;
    ///             let fails = if e == 7 { n % 25 < 2 } else { n % 1000 == 999 };
    ///             let _ = endpoints
    ///                 .call(&format!("10.0.0.{e}:80"), async move {
    ///                     if fails { Err("502") } else { Ok(()) }
    ///                 })
    ///                 .await;
    ///         }
    ///     }
    ///     tokio::time::sleep(Duration::from_secs(1)).await;
    /// }
    /// assert_eq!(endpoints.breaker("10.0.0.7:80").state(), State::Open); // ejected
    /// assert_eq!(endpoints.breaker("10.0.0.8:80").state(), State::Closed);
    ///
    /// let err = Breaker::try_new("docs::plain_outliers", config).unwrap_err();
    /// assert_eq!(err.field(), "outliers");
    /// # }
    /// ```
    pub const fn outliers(mut self, outliers: Outliers) -> Self {
        self.outliers = Some(outliers);
        self
    }
}
