//! Changing a running breaker's configuration: concurrent reconfigurations leave the last one
//! in force *and* enforced; a `ConfigPatch` (feature `serde`) changes only the keys it names.

use std::{
    sync::{Arc, Barrier},
    thread,
    time::Duration,
};

use breaker::{Breaker, BreakerError, CallError, Config};

/// What `config()` says is what the call path does: a bulkhead of 1 refuses a nested call,
/// and a 50 ms timeout stops a 200 ms call; without them both go through.
fn enforced_as_said(breaker: &Breaker, rt: &tokio::runtime::Runtime) -> Result<(), String> {
    let said = breaker.handle().config();
    let bulkhead = said.values().max_concurrent == Some(1);
    let nested = breaker.call_sync(|| Ok::<_, ()>(breaker.call_sync(|| Ok::<_, ()>(()))));
    let refused = matches!(
        nested,
        Ok(Err(CallError::Breaker(BreakerError::Full { .. })))
    );
    if bulkhead != refused {
        return Err(format!("{said:?}, yet the nested call gave {nested:?}"));
    }
    let timeout = said.values().timeout.is_some();
    let slow = rt.block_on(breaker.call(async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok::<_, ()>(())
    }));
    if timeout != matches!(slow, Err(CallError::Breaker(BreakerError::Timeout { .. }))) {
        return Err(format!("{said:?}, yet the 200 ms call gave {slow:?}"));
    }
    Ok(())
}

/// Two threads reconfigure at once, thousands of times: whichever wins, the configuration in
/// force is the one enforced (the race this closes was: replace A, replace B, adopt B,
/// adopt A).
#[test]
fn racing_reconfigurations_leave_the_winner_enforced() {
    let _serial = crate::serial();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let base = Config::default().threshold(1000);
    let plain = base.clone().threshold(5);
    let guarded = base
        .clone()
        .max_concurrent(1)
        .timeout(Duration::from_millis(50));
    let breaker = Breaker::new("config_patch::race", base.clone());
    let start = Arc::new(Barrier::new(3));
    let done = Arc::new(Barrier::new(3));
    const TRIALS: usize = 100_000;
    let racers: Vec<_> = [plain, guarded]
        .into_iter()
        .map(|config| {
            let (b, start, done) = (breaker.clone(), start.clone(), done.clone());
            thread::spawn(move || {
                for _ in 0..TRIALS {
                    start.wait();
                    b.reconfigure(config.clone()).unwrap();
                    done.wait();
                }
            })
        })
        .collect();
    let mut wrong = Vec::new();
    for trial in 0..TRIALS {
        breaker.reconfigure(base.clone()).unwrap();
        start.wait();
        done.wait();
        if let Err(e) = enforced_as_said(&breaker, &rt) {
            wrong.push(format!("trial {trial}: {e}"));
        }
    }
    for r in racers {
        r.join().unwrap();
    }
    assert!(
        wrong.is_empty(),
        "{} of {TRIALS} trials: {}",
        wrong.len(),
        wrong[0]
    );
}

/// `Breaker::config()` is the configuration in force; `Breaker::reset()` is the handle's.
#[test]
fn config_and_reset_without_a_handle() {
    let _serial = crate::serial();
    let b = Breaker::new("config_patch::config", Config::default().threshold(1));
    assert_eq!(b.config().values().threshold, Some(1));
    b.reconfigure(Config::default().threshold(2)).unwrap();
    assert_eq!(b.config(), b.handle().config());
    assert_eq!(b.config().values().threshold, Some(2));
    let _ = b.call_sync(|| Err::<(), _>("503"));
    let _ = b.call_sync(|| Err::<(), _>("503"));
    assert_eq!(b.state(), breaker::State::Open);
    b.reset();
    assert_eq!(b.state(), breaker::State::Closed);
    assert_eq!(b.stats().calls, 0);
}

#[path = "support/logs.rs"]
mod logs;

/// This file's tests one at a time: each reconfigures, and the log line's callsite may be
/// registered by one thread while another's subscriber waits for it (tracing can then keep
/// "not wanted" for it), which made the log test miss its line now and then.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Every change in force logs one INFO line naming the keys changed, old → new; a change
/// that changes no key logs none.
#[test]
fn every_change_logs_one_line_naming_the_keys_old_and_new() {
    let _serial = crate::serial();
    let logs = logs::Logs::new(tracing::Level::INFO, "breaker");
    tracing::subscriber::with_default(logs.clone(), || {
        // Another test's thread may have registered the log line's callsite while no
        // subscriber wanted it, racing this one's registration (tracing then keeps "never"
        // for it): ask every callsite again, with this thread's subscriber in place.
        tracing::callsite::rebuild_interest_cache();
        let b = Breaker::new("config_patch::logged", Config::default().threshold(5));
        b.reconfigure(
            Config::default()
                .threshold(3)
                .timeout(Duration::from_millis(300)),
        )
        .unwrap();
        b.reconfigure(b.config()).unwrap();
        assert!(b.reconfigure(Config::default().threshold(0)).is_err());
    });
    let lines: Vec<_> = logs
        .messages()
        .into_iter()
        .filter(|m| m.contains("reconfigured"))
        .collect();
    assert_eq!(
        lines,
        ["breaker config_patch::logged reconfigured: threshold: 5 → 3, timeout: none → 300ms"]
    );
}

#[cfg(feature = "serde")]
mod patch {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

    use breaker::{circuit_breaker, registry, ConfigPatch, KeyedBreaker, State};
    use tokio::time::Instant;

    use super::*;

    fn patch(json: &str) -> ConfigPatch {
        serde_json::from_str(json).unwrap()
    }

    static ATTEMPTS: AtomicU32 = AtomicU32::new(0);
    static SLOW: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    #[derive(Debug, thiserror::Error)]
    enum Error {
        #[error("503")]
        Unavailable,
        #[error(transparent)]
        Breaker(#[from] BreakerError),
    }

    /// Fails at once, or (when `SLOW`) answers after 2 s.
    #[circuit_breaker(
        name = "config_patch::search",
        timeout = "300ms",
        retry = 3,
        backoff = "50ms",
        dry_run = true
    )]
    async fn search() -> Result<(), Error> {
        ATTEMPTS.fetch_add(1, SeqCst);
        if SLOW.load(SeqCst) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            return Ok(());
        }
        Err(Error::Unavailable)
    }

    /// The rollout: a dry run with the attribute's `timeout` and `retry`, patched from a
    /// file that names neither. Both stay: a failing call still makes 3 attempts, a 2 s call
    /// still times out. (A `Config` read from the same file and given to `reconfigure` drops
    /// them: 1 attempt, and the 2 s call returns `Ok`.)
    #[tokio::test(start_paused = true)]
    #[allow(clippy::await_holding_lock)] // the file's tests one at a time (`serial`)
    async fn a_file_keeps_the_attributes_timeout_and_retry() {
        let _serial = crate::serial();
        let _ = search().await;
        let handle = registry().get("config_patch::search").unwrap();
        handle.reset();
        handle
            .apply(&patch(r#"{"threshold":3,"cool_off":"5s"}"#))
            .unwrap();
        let now = handle.config().values();
        assert_eq!(
            (now.threshold, now.cool_off),
            (Some(3), Duration::from_secs(5))
        );
        assert_eq!(now.timeout, Some(Duration::from_millis(300)));
        assert_eq!(
            (now.retry, now.backoff),
            (Some(3), Some(Duration::from_millis(50)))
        );
        assert!(now.dry_run, "not named: still a dry run");

        ATTEMPTS.store(0, SeqCst);
        assert!(matches!(search().await, Err(Error::Unavailable)));
        assert_eq!(ATTEMPTS.load(SeqCst), 3, "the attribute's retry = 3");

        handle.reset();
        SLOW.store(true, SeqCst);
        let start = Instant::now();
        let slow = search().await;
        assert!(
            matches!(slow, Err(Error::Breaker(BreakerError::Timeout { .. }))),
            "{slow:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "timed out at 300 ms"
        );
        SLOW.store(false, SeqCst);

        // Enforcing from the next file: refusals now, the timeout and retry still there.
        handle.reset();
        handle.apply(&patch(r#"{"dry_run":false}"#)).unwrap();
        ATTEMPTS.store(0, SeqCst);
        let _ = search().await;
        assert_eq!(handle.state(), State::Open);
        assert_eq!(ATTEMPTS.load(SeqCst), 3);
        let refused = search().await;
        assert!(
            matches!(&refused, Err(Error::Breaker(e)) if e.is_open()),
            "{refused:?}"
        );
        assert_eq!(
            handle.config().values().timeout,
            Some(Duration::from_millis(300))
        );
    }

    /// A patch changes the keys it names, keeps the others (the hook included), and `null`
    /// takes a key off (back to its default).
    #[test]
    fn a_patch_changes_only_what_it_names_and_null_takes_a_key_off() {
        let _serial = crate::serial();
        let seen = Arc::new(AtomicU32::new(0));
        let count = seen.clone();
        let b = Breaker::new(
            "config_patch::only",
            Config::default()
                .threshold(5)
                .failure_rate(50)
                .window_calls(20)
                .timeout(Duration::from_millis(300))
                .max_concurrent(8)
                .cool_off(Duration::from_secs(30))
                .on_state_change(move |_| {
                    count.fetch_add(1, SeqCst);
                }),
        );
        let p = patch(r#"{"threshold": 1, "max_concurrent": null, "cool_off": null}"#);
        assert_eq!(p.keys(), ["threshold", "cool_off", "max_concurrent"]);
        b.apply(&p).unwrap();
        let now = b.config().values();
        assert_eq!(now.threshold, Some(1));
        assert_eq!(now.max_concurrent, None, "null: off");
        assert_eq!(now.cool_off, Duration::from_secs(10), "null: the default");
        assert_eq!(now.timeout, Some(Duration::from_millis(300)), "kept");
        assert_eq!(now.failure_rate, Some(50), "kept");
        assert_eq!(now.window, Some(breaker::Window::Calls(20)), "kept");
        let _ = b.call_sync(|| Err::<(), _>("503"));
        assert_eq!(b.state(), State::Open);
        assert_eq!(seen.load(SeqCst), 1, "the hook is kept");

        // A time window for a count window; `window_calls: null` takes the count window off.
        b.apply(&patch(r#"{"window_duration": "1m"}"#)).unwrap();
        assert_eq!(
            b.config().values().window,
            Some(breaker::Window::Duration(Duration::from_secs(60)))
        );
        b.apply(&patch(r#"{"window_calls": null}"#)).unwrap();
        assert!(
            b.config().values().window.is_some(),
            "a time window is not a count window"
        );

        // The result is validated as a whole: nothing changes, the field is named.
        let e = b.apply(&patch(
            r#"{"failure_rate": null, "window_duration": null, "min_calls": 5}"#,
        ));
        assert_eq!(e.unwrap_err().field(), "min_calls");
        assert_eq!(b.config().values().failure_rate, Some(50), "unchanged");
        let e = b.apply(&patch(r#"{"window_calls": 5, "window_duration": "1m"}"#));
        assert_eq!(e.unwrap_err().field(), "window_duration");
        assert!(patch("{}").is_empty());
    }

    /// Unknown keys are refused; a wrong type names its key and what it wants, in a patch
    /// and in `Config`'s own form.
    #[test]
    fn a_wrong_type_names_its_key() {
        let _serial = crate::serial();
        let e = serde_json::from_str::<ConfigPatch>(r#"{"cool_off": 5}"#).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains(
                r#"`cool_off`: invalid type: integer `5`, expected a duration string like "10s""#
            ),
            "{e}"
        );
        let e = serde_json::from_str::<Config>(r#"{"threshold": 3, "cool_off": 5}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                r#"`cool_off`: invalid type: integer `5`, expected a duration string like "10s""#
            ),
            "{e}"
        );
        let e = serde_json::from_str::<ConfigPatch>(r#"{"threshold": "3"}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("`threshold`: invalid type: string \"3\""),
            "{e}"
        );
        let e = serde_json::from_str::<ConfigPatch>(r#"{"treshold": 3}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `treshold`"), "{e}");
        let e = serde_json::from_str::<ConfigPatch>(r#"{"timeout": "soon"}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("`timeout`: \"soon\" is not a duration"),
            "{e}"
        );
        let e = serde_json::from_str::<ConfigPatch>(r#"{"retry": 2, "retry": 3}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate field `retry`"), "{e}");
    }

    /// A patch is written as read: the keys it names, `null` for those it takes off.
    #[test]
    fn a_patch_round_trips() {
        let _serial = crate::serial();
        let text = r#"{"threshold":3,"cool_off":"5s","timeout":null,"dry_run":false}"#;
        let p = patch(text);
        let back = serde_json::to_string(&p).unwrap();
        assert_eq!(
            back,
            r#"{"threshold":3,"cool_off":"5s","timeout":null,"dry_run":false}"#
        );
        assert_eq!(patch(&back), p);
    }

    /// Two patches applied at once from two threads, thousands of times: neither loses the
    /// other's key (apply reads, changes and puts in force under one lock).
    #[test]
    fn racing_patches_keep_both_keys() {
        let _serial = crate::serial();
        let b = Breaker::new("config_patch::racing", Config::default());
        let patches = [patch(r#"{"threshold": 3}"#), patch(r#"{"timeout": "1s"}"#)];
        let start = Arc::new(Barrier::new(3));
        let done = Arc::new(Barrier::new(3));
        const TRIALS: usize = 2_000;
        let racers: Vec<_> = patches
            .into_iter()
            .map(|p| {
                let (b, start, done) = (b.clone(), start.clone(), done.clone());
                thread::spawn(move || {
                    for _ in 0..TRIALS {
                        start.wait();
                        b.apply(&p).unwrap();
                        done.wait();
                    }
                })
            })
            .collect();
        for trial in 0..TRIALS {
            b.reconfigure(Config::default()).unwrap();
            start.wait();
            done.wait();
            let now = b.config().values();
            assert_eq!(
                (now.threshold, now.timeout),
                (Some(3), Some(Duration::from_secs(1))),
                "trial {trial}"
            );
        }
        for r in racers {
            r.join().unwrap();
        }
    }

    /// A keyed breaker's patch changes every key's configuration, keeping what it does not
    /// name; a key alone is not patched.
    #[test]
    fn a_keyed_breaker_is_patched_whole() {
        let _serial = crate::serial();
        let hosts = KeyedBreaker::<String>::new(
            "config_patch::keyed",
            Config::default()
                .threshold(5)
                .timeout(Duration::from_millis(300)),
        );
        let before = hosts.breaker("a");
        hosts.apply(&patch(r#"{"threshold": 1}"#)).unwrap();
        for b in [before, hosts.breaker("b")] {
            let now = b.config().values();
            assert_eq!(now.threshold, Some(1));
            assert_eq!(now.timeout, Some(Duration::from_millis(300)));
        }
        let _ = hosts.call_sync("a", || Err::<(), _>("503"));
        assert_eq!(hosts.breaker("a").state(), State::Open, "enforced");
        let e = hosts.breaker("a").apply(&patch(r#"{"threshold": 2}"#));
        assert_eq!(e.unwrap_err().field(), "config");
        let e = hosts.apply(&patch(r#"{"threshold": 0}"#));
        assert_eq!(e.unwrap_err().field(), "threshold");
    }
}
