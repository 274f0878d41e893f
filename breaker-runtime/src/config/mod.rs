//! The breaker's configuration: a builder that never panics, validated once by
//! [`Breaker::try_new`](crate::Breaker::try_new).
//!
//! | module | what it holds |
//! | --- | --- |
//! | this one | [`Config`]: the builder, its defaults, comparing two configurations |
//! | `policy` | checking every field once, and the [`Policy`] the engine runs on |
//! | `retry` | the retry keys (`retry`, `retry_budget`, `backoff`, `retry_within`): builder methods, checks, [`RetryPolicy`], their defaults |
//! | `hedge` | the hedging keys (`hedge`, `hedge_delay`, `hedge_budget`): builder methods, checks, [`HedgeDelay`], `HedgePolicy` and its word |
//! | `probe` | the `probe` key: the breaker's own probe as the configuration keeps it |
//! | `outliers` | the `outliers` key: [`Outliers`], its builder methods and checks, [`OutlierPolicy`] (detection is `crate::outliers`') |
//! | `overload` | the overload keys (`throttle`, `ramp`, `dry_run`, `adaptive_concurrency`): their builder methods and checks, and [`OverloadPolicy`] |
//! | `keys` | every key of a file, listed once: read, written, and logged when it changes |
//! | `patch` | feature `serde`: [`ConfigPatch`], a file that changes only the keys it names; one key's value in a file |
//! | `text` | feature `serde`: one key's value in a file (durations as humantime strings, `null`), its errors naming the key |
//! | `values` | [`ConfigValues`]: a configuration's keys read back |
//! | `error` | [`ConfigError`]: which field, and why |
//! | `serde` | feature `serde`: [`Config`] as a file or a control plane writes it |

mod error;
mod hedge;
mod keys;
mod outliers;
mod overload;
#[cfg(feature = "serde")]
mod patch;
mod policy;
mod probe;
mod retry;
#[cfg(feature = "serde")]
mod serde;
#[cfg(feature = "serde")]
mod text;
mod values;

pub use error::ConfigError;
pub(crate) use hedge::{DelayPolicy, HedgeConfig, HedgePolicy};
pub use hedge::{
    HedgeDelay, DEFAULT_HEDGE_BUDGET_PERCENT, MAX_HEDGES, MAX_HEDGE_DELAY, MIN_HEDGE_DELAY,
};
pub(crate) use keys::log_change;
pub use outliers::Outliers;
pub(crate) use outliers::{refuse_plain as refuse_outliers, OutlierPolicy};
pub(crate) use overload::{OverloadConfig, OverloadPolicy};
#[cfg(feature = "serde")]
pub use patch::ConfigPatch;
pub(crate) use policy::{Policy, Resolved};
pub(crate) use probe::ProbeFn;
pub(crate) use retry::{RetryConfig, RetryPolicy};
pub use retry::{DEFAULT_BACKOFF, DEFAULT_BUDGET_PERCENT, DEFAULT_RETRY_WITHIN};
pub use values::ConfigValues;

use std::{fmt, sync::Arc, time::Duration};

use crate::events::Transition;

/// A hook called on every transition (see [`Config::on_state_change`]).
pub(crate) type Hook = Arc<dyn Fn(&Transition) + Send + Sync>;

/// The sliding window that [`Config::failure_rate`] judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last N calls.
    Calls(u32),
    /// The calls of the last D (kept in twenty buckets of D/20 each).
    Duration(Duration),
}

/// How a breaker behaves: one builder method per key of the `#[circuit_breaker]` attribute,
/// with the same names and defaults.
///
/// Builder methods only store; [`Breaker::try_new`](crate::Breaker::try_new) validates and
/// names the offending field in a [`ConfigError`].
///
/// ```
/// use std::time::Duration;
/// use breaker::{Breaker, Config};
///
/// let config = Config::default()
///     .failure_rate(50)
///     .window_calls(20)
///     .cool_off(Duration::from_secs(30))
///     .probes(3);
/// let fraud = Breaker::try_new("docs::fraud", config).unwrap();
/// assert_eq!(fraud.name(), "docs::fraud");
///
/// let err = Breaker::try_new("docs::bad", Config::default().threshold(0)).unwrap_err();
/// assert_eq!(err.field(), "threshold");
/// ```
///
/// Counts are `u32`, so a negative one is a compile error, not a surprise at run time:
///
/// ```compile_fail,E0600
/// let config = breaker::Config::default().threshold(-1);
/// ```
#[derive(Clone)]
pub struct Config {
    pub(crate) threshold: Option<u32>,
    pub(crate) failure_rate: Option<u32>,
    pub(crate) window: Option<Window>,
    pub(crate) min_calls: Option<u32>,
    pub(crate) slow_call: Option<Duration>,
    pub(crate) cool_off: Duration,
    pub(crate) max_cool_off: Option<Duration>,
    pub(crate) jitter: Option<Duration>,
    pub(crate) probes: u32,
    pub(crate) success_threshold: Option<u32>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_concurrent: Option<u32>,
    pub(crate) on_state_change: Option<Hook>,
    pub(crate) max_keys: usize,
    pub(crate) idle: Duration,
    pub(crate) max_open_percent: Option<u32>,
    /// Throttling, the ramp, dry run and the adaptive bulkhead (`overload::settings`).
    pub(crate) overload: OverloadConfig,
    /// `retry`, `retry_budget`, `backoff`, `retry_within` (`crate::retry`).
    pub(crate) retry: RetryConfig,
    /// `hedge`, `hedge_delay`, `hedge_budget` (`crate::hedge`).
    pub(crate) hedge: HedgeConfig,
    /// The breaker's own probe (`crate::probe`).
    pub(crate) probe: Option<ProbeFn>,
    /// Outlier ejection, keyed breakers only (`crate::outliers`).
    pub(crate) outliers: Option<Outliers>,
}

impl Default for Config {
    /// [`Config::DEFAULT`].
    fn default() -> Self {
        Config::DEFAULT
    }
}

impl Config {
    /// The defaults, as a constant: every builder but [`on_state_change`](Self::on_state_change)
    /// and [`probe`](Self::probe) (which take closures) is a `const fn`, so a configuration
    /// can be a `const` (`const POLICY: Config = Config::DEFAULT.threshold(3);`), built at
    /// compile time. The attribute builds its breakers' configurations so.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config};
    ///
    /// const PAYMENTS: Config = Config::DEFAULT.threshold(3).cool_off(Duration::from_secs(30));
    ///
    /// let same = Config::default().threshold(3).cool_off(Duration::from_secs(30));
    /// assert!(PAYMENTS.same_policy(&same));
    /// let payments = Breaker::try_new("docs::payments", PAYMENTS).unwrap();
    /// assert_eq!(payments.name(), "docs::payments");
    /// ```
    pub const DEFAULT: Config = Config {
        threshold: None,
        failure_rate: None,
        window: None,
        min_calls: None,
        slow_call: None,
        cool_off: Duration::from_secs(10),
        max_cool_off: None,
        jitter: None,
        probes: 1,
        success_threshold: None,
        timeout: None,
        max_concurrent: None,
        on_state_change: None,
        max_keys: Config::DEFAULT_MAX_KEYS,
        idle: Config::DEFAULT_IDLE,
        max_open_percent: None,
        overload: OverloadConfig::DEFAULT,
        retry: RetryConfig::DEFAULT,
        hedge: HedgeConfig::DEFAULT,
        probe: None,
        outliers: None,
    };

    /// The most [`probes`](Self::probes) a breaker accepts. Each probe slot is a lease that
    /// half-open admission scans under the breaker's lock, and the table is allocated up
    /// front, so an unbounded count is an allocation of the user's choosing (`u32::MAX`
    /// would ask for about 100 GB). Half-open exists to let *a few* calls test a recovering
    /// dependency; a thousand at once is already a full load on it, not a probe.
    pub const MAX_PROBES: u32 = 1_000;
    /// The largest count window, [`window_calls`](Self::window_calls). The window keeps one
    /// byte per call, allocated when the breaker is created, so this bounds it at 100 KB
    /// per breaker (4 GB for `4_000_000_000`). A hundred thousand calls is ten seconds of
    /// traffic at 10 000 calls a second; to judge a longer stretch, use
    /// [`window_duration`](Self::window_duration), whose memory does not grow with traffic.
    pub const MAX_WINDOW_CALLS: u32 = 100_000;
    /// The default of [`max_keys`](Self::max_keys).
    pub const DEFAULT_MAX_KEYS: usize = 10_000;
    /// The default of [`idle`](Self::idle): ten minutes.
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);

    /// Consecutive failures that open the breaker (default 5; off when only
    /// [`failure_rate`](Self::failure_rate) is set).
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// let b = Breaker::new("docs::threshold", Config::default().threshold(3));
    /// for _ in 0..3 {
    ///     let _ = b.call_sync(|| Err::<(), _>("503"));
    /// }
    /// assert_eq!(b.state(), State::Open); // three in a row
    /// ```
    pub const fn threshold(mut self, failures: u32) -> Self {
        self.threshold = Some(failures);
        self
    }
    /// Open when this percentage (1..=100) of the calls in the window failed.
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// // Open when half of the last 20 calls failed, once at least 10 were made.
    /// let b = Breaker::new("docs::failure_rate", Config::default().failure_rate(50).window_calls(20).min_calls(10));
    /// for i in 0..10 {
    ///     let _ = b.call_sync(|| if i % 2 == 0 { Ok(()) } else { Err("503") });
    /// }
    /// assert_eq!(b.state(), State::Open);
    /// ```
    pub const fn failure_rate(mut self, percent: u32) -> Self {
        self.failure_rate = Some(percent);
        self
    }
    /// Judge the failure rate over the last `calls` calls (default 100, at most
    /// [`MAX_WINDOW_CALLS`](Self::MAX_WINDOW_CALLS)).
    pub const fn window_calls(mut self, calls: u32) -> Self {
        self.window = Some(Window::Calls(calls));
        self
    }
    /// Judge the failure rate over the calls of the last `window`.
    pub const fn window_duration(mut self, window: Duration) -> Self {
        self.window = Some(Window::Duration(window));
        self
    }
    /// Calls the window must hold before the rate is judged (default 10, at most the
    /// window's size).
    pub const fn min_calls(mut self, calls: u32) -> Self {
        self.min_calls = Some(calls);
        self
    }
    /// A call that takes at least this long counts as a failure; its result still goes to
    /// the caller.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config, State};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let b = Breaker::new("docs::slow_call", Config::default().threshold(1).slow_call(Duration::from_millis(200)));
    /// let slow = b.call(async {
    ///     tokio::time::sleep(Duration::from_millis(300)).await;
    ///     Ok::<_, ()>("late but fine")
    /// });
    /// assert_eq!(slow.await.unwrap(), "late but fine"); // the caller gets it …
    /// assert_eq!(b.state(), State::Open); // … and it counted as a failure
    /// # }
    /// ```
    pub const fn slow_call(mut self, at_least: Duration) -> Self {
        self.slow_call = Some(at_least);
        self
    }
    /// How long the breaker stays open before it admits a probe (default 10 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config, State};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let b = Breaker::new("docs::cool_off", Config::default().threshold(1).cool_off(Duration::from_secs(30)));
    /// let _ = b.call(async { Err::<(), _>("down") }).await;
    /// tokio::time::advance(Duration::from_secs(29)).await;
    /// assert_eq!(b.state(), State::Open);
    /// tokio::time::advance(Duration::from_secs(1)).await;
    /// assert_eq!(b.state(), State::HalfOpen);
    /// # }
    /// ```
    pub const fn cool_off(mut self, cool_off: Duration) -> Self {
        self.cool_off = cool_off;
        self
    }
    /// Double the cool-off at each reopening from half-open, up to this.
    pub const fn max_cool_off(mut self, cap: Duration) -> Self {
        self.max_cool_off = Some(cap);
        self
    }
    /// Add a random 0..`jitter` to each cool-off, so a fleet does not probe on one tick.
    pub const fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = Some(jitter);
        self
    }
    /// Calls admitted at once while half-open (default 1, at most
    /// [`MAX_PROBES`](Self::MAX_PROBES)).
    pub const fn probes(mut self, probes: u32) -> Self {
        self.probes = probes;
        self
    }
    /// Consecutive successful probes that close the breaker (default: `probes`).
    pub const fn success_threshold(mut self, successes: u32) -> Self {
        self.success_threshold = Some(successes);
        self
    }
    /// Deadline of one call; a timeout is a failure and yields
    /// [`BreakerError::Timeout`](crate::BreakerError::Timeout). Needs a tokio runtime with
    /// its time driver, as `tokio::time::timeout` does.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let b = Breaker::new("docs::timeout", Config::default().timeout(Duration::from_millis(600)));
    /// let hung = b.call(std::future::pending::<Result<(), std::io::Error>>()).await;
    /// let err = hung.unwrap_err().into_breaker().unwrap();
    /// assert!(err.is_timeout());
    /// assert_eq!(b.stats().timeouts, 1);
    /// # }
    /// ```
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Bulkhead: at most this many calls in flight; more fail fast with
    /// [`BreakerError::Full`](crate::BreakerError::Full).
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let b = Breaker::new("docs::max_concurrent", Config::default().max_concurrent(1));
    /// let (release, wait) = tokio::sync::oneshot::channel::<()>();
    /// let first = tokio::spawn(b.clone().call_owned(async move { wait.await.map_err(|_| "gone") }));
    /// tokio::task::yield_now().await; // the first call takes the only seat
    /// let second = b.call(async { Ok::<_, &str>(()) }).await;
    /// assert!(second.unwrap_err().is_full());
    /// release.send(()).unwrap();
    /// assert!(first.await.unwrap().is_ok());
    /// # }
    /// ```
    pub const fn max_concurrent(mut self, calls: u32) -> Self {
        self.max_concurrent = Some(calls);
        self
    }
    /// Called on every transition, after the `tracing` event, outside the breaker's lock and
    /// in the order the transitions happened. A panic in it is caught and logged.
    pub fn on_state_change(mut self, hook: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.on_state_change = Some(Arc::new(hook));
        self
    }
    /// A keyed breaker keeps at most this many keys' breakers (default
    /// [`DEFAULT_MAX_KEYS`](Self::DEFAULT_MAX_KEYS)); a plain breaker ignores it.
    pub const fn max_keys(mut self, keys: usize) -> Self {
        self.max_keys = keys;
        self
    }
    /// A keyed breaker drops a key's breaker that was idle this long and is as good as a
    /// fresh one, or open or half-open with no call in flight (it protects nobody), never
    /// one forced open or disabled (default [`DEFAULT_IDLE`](Self::DEFAULT_IDLE), ten
    /// minutes); a plain breaker ignores it.
    pub const fn idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }
    /// A keyed breaker keeps at most `percent` (1 to 100) of its live keys open or half-open
    /// at once, and at least one; a key whose failures would open it beyond that stays
    /// closed, still counting (its next failure asks again), with one WARN a minute. When
    /// most hosts look dead at once the fault is usually ours (our network, our DNS), and
    /// opening every key would make it worse (Envoy's `max_ejection_percent`). A place is
    /// freed when its key leaves open and half-open or leaves the map (evicted, or swept
    /// after [`idle`](Self::idle) without a call). Keys the fleet opens are neither counted
    /// nor held back. A plain breaker ignores it.
    ///
    /// ```
    /// use breaker::{Config, KeyedBreaker, State};
    ///
    /// let config = Config::default().threshold(1).max_open_percent(50);
    /// let hosts = KeyedBreaker::<String>::new("docs::max_open", config);
    /// for host in ["a", "b", "c", "d"] {
    ///     let _ = hosts.call_sync(host, || Err::<(), _>("connection refused"));
    /// }
    /// let open = ["a", "b", "c", "d"].iter().filter(|h| hosts.breaker(**h).state() == State::Open);
    /// assert_eq!(open.count(), 2, "half of the four keys");
    /// ```
    pub const fn max_open_percent(mut self, percent: u32) -> Self {
        self.max_open_percent = Some(percent);
        self
    }

    /// Whether two configurations describe the same policy once defaults are resolved
    /// (`Config::default()` and `Config::default().threshold(5)` do); hooks are not compared
    /// (see `same_hooks`).
    pub fn same_policy(&self, other: &Config) -> bool {
        match (self.validate(), other.validate()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    /// Whether both have no `on_state_change` hook, or the very same one (one `Arc`). Two
    /// closures are never the same hook, even with the same code: a second definition that
    /// shares a breaker through its name has its own hook, which that breaker never calls,
    /// so the registry warns when this is `false`.
    pub(crate) fn same_hooks(&self, other: &Config) -> bool {
        match (&self.on_state_change, &other.on_state_change) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Equal when every setting is, and both have the same hook (or none).
impl PartialEq for Config {
    fn eq(&self, other: &Config) -> bool {
        self.same_hooks(other)
            && self.threshold == other.threshold
            && self.failure_rate == other.failure_rate
            && self.window == other.window
            && self.min_calls == other.min_calls
            && self.slow_call == other.slow_call
            && self.cool_off == other.cool_off
            && self.max_cool_off == other.max_cool_off
            && self.jitter == other.jitter
            && self.probes == other.probes
            && self.success_threshold == other.success_threshold
            && self.timeout == other.timeout
            && self.max_concurrent == other.max_concurrent
            && self.max_keys == other.max_keys
            && self.idle == other.idle
            && self.max_open_percent == other.max_open_percent
            && self.overload == other.overload
            && self.retry == other.retry
            && self.outliers == other.outliers
            && self.hedge == other.hedge
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("threshold", &self.threshold)
            .field("failure_rate", &self.failure_rate)
            .field("window", &self.window)
            .field("min_calls", &self.min_calls)
            .field("slow_call", &self.slow_call)
            .field("cool_off", &self.cool_off)
            .field("max_cool_off", &self.max_cool_off)
            .field("jitter", &self.jitter)
            .field("probes", &self.probes)
            .field("success_threshold", &self.success_threshold)
            .field("timeout", &self.timeout)
            .field("max_concurrent", &self.max_concurrent)
            .field("on_state_change", &self.on_state_change.is_some())
            .field("max_keys", &self.max_keys)
            .field("idle", &self.idle)
            .field("max_open_percent", &self.max_open_percent)
            .field("overload", &self.overload)
            .field("retry", &self.retry)
            .field("hedge", &self.hedge)
            .field("probe", &self.probe.is_some())
            .field("outliers", &self.outliers)
            .finish()
    }
}

#[cfg(test)]
mod tests;
