//! The `probe` key of [`Config`]: the breaker's own probe, as the configuration keeps it.
//! Running it is `crate::probe`'s.

use std::{future::Future, pin::Pin, sync::Arc};

use crate::{Config, Verdict};

/// A breaker's own probe, as [`Config::probe`] keeps it.
pub(crate) type ProbeFn =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Verdict> + Send>> + Send + Sync>;

impl Config {
    /// The breaker's own probe: when a cool-off ends and no call arrives to probe, the
    /// breaker runs `probe` itself, as a tokio task, holding a probe slot like any probe. Its
    /// [`Verdict`] (or `Result`: `Ok` a success, `Err` a failure) decides as a probe call's
    /// would: a success closes the breaker (after `success_threshold` successes, probing
    /// again while half-open), a failure reopens it with its backoff, and the task probes
    /// again at the end of the new cool-off. A dependency that recovered with no traffic is
    /// closed within one cool-off plus the probe's own time. In a fleet only the instance
    /// that holds the fleet's probe lease probes, and the others close by its result.
    ///
    /// Bounded:
    /// - A probe that has not answered within the breaker's `timeout` (without one, its
    ///   `cool_off`: the probe's lease) is dropped and counted a failed probe (a timeout);
    ///   one that panics is a failed probe too. Either reopens the breaker with its backoff,
    ///   and it probes again.
    /// - One task per breaker at a time, from an opening until the breaker closes (or is
    ///   disabled or forced open). While half-open with its probe slots held by calls, it
    ///   waits for their outcome (a call that came first is the probe).
    /// - The task holds the breaker only by a weak reference: dropping the breaker's last
    ///   clone and [`Handle`](crate::Handle) stops it at once (a probe under way is dropped)
    ///   and frees the breaker, registry entry included.
    ///
    /// Opt-in: a breaker without a probe runs no task. The task starts at an opening, from
    /// the thread that opened the breaker, which must be in a tokio runtime (else a WARN
    /// says the probe did not run; calls still probe). Each probe is counted as a call in
    /// [`Stats`](crate::Stats). Not with a [`KeyedBreaker`](crate::KeyedBreaker): one probe
    /// cannot tell which key recovered. Not compared by `==`, and not written by `serde`
    /// (it is code); [`reconfigure`](crate::Breaker::reconfigure) with a config without one
    /// keeps the probe in force.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config, State};
    ///
    /// async fn ping() -> Result<(), std::io::Error> {
    ///     Ok(()) // e.g. the dependency's health endpoint
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let quiet = Breaker::new(
    ///     "docs::probe",
    ///     Config::default().threshold(1).cool_off(Duration::from_secs(30)).probe(ping),
    /// );
    /// let _ = quiet.call(async { Err::<(), _>("503") }).await;
    /// assert_eq!(quiet.state(), State::Open);
    /// tokio::time::sleep(Duration::from_secs(31)).await; // no call comes
    /// assert_eq!(quiet.state(), State::Closed); // its own probe closed it
    /// # }
    /// ```
    pub fn probe<F, Fut, R>(mut self, probe: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: Into<Verdict>,
    {
        self.probe = Some(Arc::new(move || {
            let f = probe();
            Box::pin(async move { f.await.into() })
        }));
        self
    }
}
