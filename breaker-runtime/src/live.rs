//! Live configuration: what a breaker reads of its configuration while it runs ([`Live`]),
//! and which keys a running breaker keeps from its first configuration. Changing it is
//! `crate::reconfigure`'s.
//!
//! The call path reads its few settings (the tripping rules, the window's shape, `slow_call`,
//! `timeout`, the bulkhead, dry run) from atomics in [`Live`], through the pointer it already
//! followed to reach them (`Core::live`, as it followed `Core::settings` before): a relaxed
//! load is the plain load it was, so the call path pays nothing for configuration that can
//! change. The tripping rules are packed into one word, so one outcome is judged wholly by
//! the old rules or wholly by the new. Everything else (cool-offs, probes, the hook) is read
//! where the breaker already takes its lock, from the validated configuration in force,
//! swapped whole. The call path's two flags (`Core::flags`: the fast path's policy, a
//! `timeout`) live beside the state word, and each breaker's are set after the new settings
//! are in place.
//!
//! Changes are one at a time ([`Live::change`]: a lock of their own, never taken on the call
//! path, held from reading the configuration in force to every breaker's adopting the new
//! one), so the configuration in force is always the one the call path enforces.
//!
//! What a breaker *holds* is never rebuilt: state, generation, counts, the open deadline,
//! the backoff step, calls in flight under the bulkhead, probe leases. A count window is
//! resized in place keeping its most recent outcomes; the window's kind or a time window's
//! span changing starts it empty (buckets of another width cannot be split exactly).

use std::{sync::Arc, time::Duration};

use crate::{
    config::{HedgePolicy, Policy, Resolved, RetryPolicy},
    sync::{lock, AtomicBool, AtomicU32, AtomicU64, Mutex, Ordering::Relaxed},
    Config, ConfigError, Window,
};

/// The configuration of a breaker (shared by a keyed breaker's keys) as it runs.
pub(crate) struct Live {
    /// `threshold` (low 32 bits, 0: none), `failure_rate` (7 bits, 0: none), `min_calls`
    /// (the 25 high bits): one load judges one outcome by one set of rules.
    rules: AtomicU64,
    /// The window's shape: 0 none, else calls, or a span in nanoseconds with [`TIMED`] set.
    window: AtomicU64,
    /// Nanoseconds, 0: none.
    slow_call: AtomicU64,
    /// Nanoseconds, 0: none.
    timeout: AtomicU64,
    /// 0: no bulkhead.
    max_concurrent: AtomicU32,
    dry_run: AtomicBool,
    /// `retry`, read once per retried call: see [`RETRY_ATTEMPTS`]; 0: no retry.
    retry: AtomicU64,
    /// `retry_within` in nanoseconds, read with `retry` (no room left in its word).
    retry_within: AtomicU64,
    /// `hedge`, read once per hedged call (`HedgePolicy::word`); 0: no hedging.
    hedge: AtomicU64,
    /// The configuration in force, as given and as validated; its lock is a leaf (nothing
    /// is locked under it), held only to clone or swap the pointer.
    resolved: Mutex<Arc<Resolved>>,
    /// Held by a change from reading the configuration in force to the last breaker's
    /// adopting the new one (see [`Live::change`]): changes are one at a time, so the last
    /// in force is the last adopted. Never taken on the call path.
    changing: Mutex<()>,
}

const TIMED: u64 = 1 << 63;
/// The retry word: attempts in its low 16 bits (saturating: 65 535 attempts are as many as
/// any budget lets through), `retry_budget`'s percent in the next 7, and the first backoff in
/// nanoseconds in the 41 high bits (about 36 minutes at most, where it saturates). One word,
/// so a retried call reads one policy whole, without the settings' lock (a mutex every
/// retried call of every thread would take).
const RETRY_ATTEMPTS: u64 = 0xffff;
const RETRY_PERCENT_SHIFT: u32 = 16;
const RETRY_BACKOFF_SHIFT: u32 = 23;
const RETRY_BACKOFF_MAX: u64 = (1 << (64 - RETRY_BACKOFF_SHIFT)) - 1;
/// `min_calls` is kept in 25 bits: a window that must hold more than 33 million calls
/// before it is judged is judged at 33 million (validation bounds a count window at
/// 100 000; only a time window of enormous traffic could tell the difference).
const MIN_CALLS_MAX: u64 = (1 << 25) - 1;

/// The tripping rules one outcome is judged by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    pub(crate) threshold: Option<u32>,
    pub(crate) failure_rate: Option<u32>,
    pub(crate) min_calls: u32,
}

fn nonzero(n: u64) -> Option<u64> {
    (n != 0).then_some(n)
}

impl Live {
    fn new(resolved: Resolved) -> Live {
        let live = Live {
            rules: AtomicU64::new(0),
            window: AtomicU64::new(0),
            slow_call: AtomicU64::new(0),
            timeout: AtomicU64::new(0),
            max_concurrent: AtomicU32::new(0),
            dry_run: AtomicBool::new(false),
            retry: AtomicU64::new(0),
            retry_within: AtomicU64::new(0),
            hedge: AtomicU64::new(0),
            resolved: Mutex::new(Arc::new(resolved)),
            changing: Mutex::new(()),
        };
        live.store(&live.resolved().policy);
        live
    }

    /// Writes the call path's copies of `policy`.
    fn store(&self, policy: &Policy) {
        let rules = u64::from(policy.threshold.unwrap_or(0))
            | u64::from(policy.failure_rate.unwrap_or(0) & 0x7f) << 32
            | u64::from(policy.min_calls).min(MIN_CALLS_MAX) << 39;
        let window = match policy.window {
            None => 0,
            Some(Window::Calls(n)) => u64::from(n),
            Some(Window::Duration(d)) => crate::clock::to_nanos(d).clamp(1, TIMED - 1) | TIMED,
        };
        self.rules.store(rules, Relaxed);
        self.window.store(window, Relaxed);
        self.slow_call.store(policy.slow_call.unwrap_or(0), Relaxed);
        self.timeout
            .store(policy.timeout.map_or(0, crate::clock::to_nanos), Relaxed);
        self.max_concurrent
            .store(policy.max_concurrent.unwrap_or(0), Relaxed);
        self.dry_run.store(policy.overload.dry_run, Relaxed);
        let within = policy
            .retry
            .as_ref()
            .map_or(0, |p| crate::clock::to_nanos(p.within));
        self.retry_within.store(within, Relaxed);
        self.retry
            .store(policy.retry.as_ref().map_or(0, retry_word), Relaxed);
        self.hedge
            .store(policy.hedge.as_ref().map_or(0, HedgePolicy::word), Relaxed);
    }

    /// The configuration in force (for transitions, probes, hooks: off the call path).
    pub(crate) fn resolved(&self) -> Arc<Resolved> {
        lock(&self.resolved).clone()
    }

    /// The configuration in force, as `config()` gives it (on a breaker, a handle, a keyed
    /// breaker).
    pub(crate) fn config(&self) -> crate::Config {
        lock(&self.resolved).config.clone()
    }

    #[inline(always)]
    pub(crate) fn rules(&self) -> Rules {
        let r = self.rules.load(Relaxed);
        Rules {
            threshold: nonzero(r & 0xffff_ffff).map(|n| n as u32),
            failure_rate: nonzero((r >> 32) & 0x7f).map(|n| n as u32),
            min_calls: (r >> 39) as u32,
        }
    }

    #[inline(always)]
    pub(crate) fn window(&self) -> Option<Window> {
        match self.window.load(Relaxed) {
            0 => None,
            w if w & TIMED != 0 => Some(Window::Duration(Duration::from_nanos(w & !TIMED))),
            n => Some(Window::Calls(n as u32)),
        }
    }

    #[inline(always)]
    pub(crate) fn slow_call(&self) -> Option<u64> {
        nonzero(self.slow_call.load(Relaxed))
    }

    #[inline(always)]
    pub(crate) fn timeout(&self) -> Option<Duration> {
        nonzero(self.timeout.load(Relaxed)).map(Duration::from_nanos)
    }

    #[inline(always)]
    pub(crate) fn max_concurrent(&self) -> Option<u32> {
        match self.max_concurrent.load(Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    #[inline(always)]
    pub(crate) fn dry_run(&self) -> bool {
        self.dry_run.load(Relaxed)
    }

    /// The retry policy in force: one load.
    #[inline(always)]
    pub(crate) fn retry(&self) -> Option<RetryPolicy> {
        let w = self.retry.load(Relaxed);
        (w != 0).then(|| RetryPolicy {
            attempts: (w & RETRY_ATTEMPTS) as u32,
            percent: ((w >> RETRY_PERCENT_SHIFT) & 0x7f) as u32,
            backoff: Duration::from_nanos(w >> RETRY_BACKOFF_SHIFT),
            // A second load: a reconfiguration racing it may pair one policy's attempts with
            // the other's bound (both valid); never a zero bound.
            within: match self.retry_within.load(Relaxed) {
                0 => crate::config::DEFAULT_RETRY_WITHIN,
                n => Duration::from_nanos(n),
            },
        })
    }

    /// Changes the configuration in force, linearizably: `next` makes the new configuration
    /// from the one in force (a whole configuration ignores it, a patch changes some keys of
    /// it), which is validated and put in force, and `adopt` puts it in place in each
    /// breaker that runs on it, all while holding `changing`. Two changes racing are one
    /// after the other: neither loses the other's keys, and what is in force at the end is
    /// what every breaker adopted last (the race this closes: replace A, replace B, adopt B,
    /// adopt A, leaving B in force and A enforced). Lock order: `changing`, then whatever
    /// `adopt` takes (a shard's, a core's), then `resolved`, a leaf. Logs one INFO line
    /// naming the keys changed, old → new, once the lock is released (a subscriber may
    /// reconfigure).
    pub(crate) fn change(
        &self,
        name: &str,
        next: impl FnOnce(&Config) -> Result<Config, ConfigError>,
        adopt: impl FnOnce(&Resolved),
    ) -> Result<Arc<Resolved>, ConfigError> {
        let changing = lock(&self.changing);
        let before = self.resolved();
        let after = self.replace(next(&before.config)?)?;
        adopt(&after);
        drop(changing);
        crate::config::log_change(name, &before.config, &after.config);
        Ok(after)
    }

    /// The hedging policy in force: one load.
    #[inline(always)]
    pub(crate) fn hedge(&self) -> Option<HedgePolicy> {
        HedgePolicy::from_word(self.hedge.load(Relaxed))
    }

    /// Validates `config`, checks it changes nothing that cannot change while the breaker
    /// runs, and puts it in force (through [`Live::change`], except at creation's tests). A config without an `on_state_change` hook keeps the
    /// hook in force (a file or a control plane cannot carry one). Returns what is now in
    /// force, for each breaker to adopt.
    pub(crate) fn replace(&self, config: Config) -> Result<Arc<Resolved>, ConfigError> {
        let policy = config.validate()?;
        let mut current = lock(&self.resolved);
        fixed(&current.policy, &policy)?;
        let mut config = config;
        if config.on_state_change.is_none() {
            config.on_state_change = current.config.on_state_change.clone();
        }
        if config.probe.is_none() {
            config.probe = current.config.probe.clone();
        }
        self.store(&policy);
        let settings = Arc::new(Resolved { policy, config });
        *current = settings.clone();
        Ok(settings)
    }
}

impl From<Resolved> for Arc<Live> {
    fn from(resolved: Resolved) -> Arc<Live> {
        Arc::new(Live::new(resolved))
    }
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Live").field(&self.resolved()).finish()
    }
}

/// A validated retry policy as one word (see [`RETRY_ATTEMPTS`]); never 0 (at least 2
/// attempts).
fn retry_word(p: &RetryPolicy) -> u64 {
    u64::from(p.attempts).min(RETRY_ATTEMPTS)
        | u64::from(p.percent & 0x7f) << RETRY_PERCENT_SHIFT
        | crate::clock::to_nanos(p.backoff).min(RETRY_BACKOFF_MAX) << RETRY_BACKOFF_SHIFT
}

/// What a running breaker keeps from its first configuration: its overload mechanisms'
/// learned state (a throttle's window, an adaptive limit with slots held by calls in
/// flight) belongs to their parameters, and a keyed breaker's `max_open_percent` budget is
/// shared by keys made with it. Changing one is refused, naming it; make a new breaker.
fn fixed(now: &Policy, next: &Policy) -> Result<(), ConfigError> {
    let why = "cannot change on a running breaker (its learned state belongs to the old \
               value); make a new breaker for it";
    let (a, b) = (&now.overload, &next.overload);
    if a.throttle != b.throttle {
        return Err(ConfigError::new("throttle", why));
    }
    if a.ramp != b.ramp {
        return Err(ConfigError::new("ramp", why));
    }
    if a.adaptive_concurrency != b.adaptive_concurrency {
        return Err(ConfigError::new("adaptive_concurrency", why));
    }
    if now.max_open_percent != next.max_open_percent {
        return Err(ConfigError::new("max_open_percent", why));
    }
    Ok(())
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;

    fn live(config: Config) -> Arc<Live> {
        config.resolve().unwrap().into()
    }

    /// The retry word gives back the validated policy (what the settings hold), follows
    /// `reconfigure`, and saturates only where no budget or caller could tell.
    #[test]
    fn the_retry_word_is_the_policy_in_force() {
        let l = live(Config::default());
        assert_eq!(l.retry(), None);
        let config = Config::default()
            .retry(3)
            .retry_budget(35)
            .backoff(Duration::from_micros(1500));
        l.replace(config).unwrap();
        assert_eq!(l.retry(), l.resolved().policy.retry);
        let p = l.retry().unwrap();
        assert_eq!(
            (p.attempts, p.percent, p.backoff),
            (3, 35, Duration::from_micros(1500))
        );
        l.replace(
            Config::default()
                .retry(100_000)
                .backoff(Duration::from_secs(7200)),
        )
        .unwrap();
        let p = l.retry().unwrap();
        assert_eq!(p.attempts, 65_535);
        assert_eq!(p.backoff, Duration::from_nanos(RETRY_BACKOFF_MAX));
        assert!(p.backoff > Duration::from_secs(36 * 60));
        l.replace(Config::default()).unwrap();
        assert_eq!(l.retry(), None, "retry taken off by reconfigure");
    }
}
