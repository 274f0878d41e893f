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
