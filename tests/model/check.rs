//! The invariants, checked after every step: the breaker agrees with the model (state,
//! every `Stats` counter, `retry_in`, the configuration in force), the counters' identity
//! holds, no `ready_when_closed` waiter sleeps while the breaker admits, no task is alive
//! that nobody accounts for, the keyed breaker stays within `max_keys` and keeps its
//! operator's keys; and at quiescence, everything given back.

use std::time::Duration;

use breaker::{State, Window};

use super::{
    model::Call,
    ops::{Knobs, Manual, Op},
    outliers::HostState,
    world::{ensure, hedge_delay, Checked, World},
};

pub fn after_step(w: &mut World) -> Checked {
    let now = w.now();
    let b = w.breaker.as_ref().expect("a breaker between operations");
    let m = &mut w.model;
    let real = b.handle().peek_state();
    ensure!(real == m.state, "state {real:?}, the model {:?}", m.state);
    let stats = b.stats();
    ensure!(
        stats == m.stats,
        "stats\n  real  {stats:?}\n  model {:?}",
        m.stats
    );
    let retry_in = b.retry_in();
    let expected = m.retry_in(now).map(Duration::from_millis);
    ensure!(
        retry_in == expected,
        "retry_in {retry_in:?}, the model {expected:?}"
    );

    let m = &w.model;
    // Each admitted call ends exactly once, as one of its outcomes.
    let calls: Vec<Call> = w.calls();
    let ended = stats.successes + stats.failures + stats.neutral + stats.cancelled;
    let refused = stats.rejected + stats.shadow_rejected;
    ensure!(
        stats.calls + m.carried_done == ended + refused + m.in_flight_since_reset(&calls),
        "calls do not add up: {stats:?}, {} in flight, {} carried over a reset",
        m.in_flight_since_reset(&calls),
        m.carried_done
    );
    ensure!(
        stats.timeouts + stats.slow_calls <= stats.failures
            && stats.abandoned <= stats.slow_calls
            && stats.throttled <= stats.rejected,
        "sub-counts beyond their counts: {stats:?}"
    );

    // What `config()` says is what the model enforces.
    config_in_force(&b.config(), &m.k)?;

    // No waiter sleeps while its breaker admits.
    let pending = w.waiters.iter().filter(|j| !j.is_finished()).count();
    ensure!(
        pending == 0 || !m.admits(now),
        "{pending} ready_when_closed waiters pending while the breaker admits ({:?})",
        m.state
    );

    // Every task is someone's: the calls in flight, the waiters, the probe task.
    let alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let race = usize::from(w.race.is_some());
    let accounted = w.lives.len() + race + pending + m.tasks() + w.pool_tasks();
    ensure!(
        alive == accounted,
        "{alive} tasks alive, {accounted} accounted for ({} calls, {race} hedged, {pending} waiters, probe task {:?}, {} pool)",
        w.lives.len(),
        m.task,
        w.pool_tasks(),
    );

    // The pool: each host open exactly while the model has it ejected (or its probe failed).
    let real = w.hosts_in_map();
    for (h, host) in w.hosts.hosts.iter().enumerate() {
        let Some(host) = host else { continue };
        let expected = match host.state {
            HostState::Closed => State::Closed,
            HostState::Open { .. } => State::Open,
        };
        let state = real.get(&format!("h{h}"));
        ensure!(
            state == Some(&expected),
            "host h{h} {state:?} at {now} ms, the model {host:?}"
        );
    }

    // The keyed breaker: bounded, and the operator's keys kept as set.
    let keys = &w.keys;
    let manual = keys.keys.values().filter(|k| k.manual.is_some()).count();
    ensure!(
        w.keyed.len() <= keys.max_keys.max(manual),
        "{} keys in a map of max_keys {}",
        w.keyed.len(),
        keys.max_keys
    );
    let map = w.in_map();
    let model: Vec<&String> = keys.keys.keys().collect();
    let real: Vec<&String> = map.keys().collect();
    ensure!(
        real == model,
        "keys in the map {real:?}, the model {model:?}"
    );
    for (name, key) in &keys.keys {
        if let Some(state) = key.manual {
            let real = map[name];
            ensure!(
                real == state,
                "key {name} {real:?}, its operator set {state:?}"
            );
        }
    }
    Ok(())
}

/// `config()`'s values are the knobs the model runs on.
fn config_in_force(config: &breaker::Config, k: &Knobs) -> Checked {
    let v = config.values();
    let ms = |n: u64| Duration::from_millis(n);
    let rules = (v.threshold, v.failure_rate, v.window, v.min_calls)
        == (
            k.threshold,
            k.rate.map(|r| r.0),
            k.rate.map(|r| Window::Calls(r.1)),
            k.rate.map(|r| r.2),
        );
    let times = (v.cool_off, v.max_cool_off, v.slow_call, v.timeout, v.ramp)
        == (
            ms(k.cool_off),
            k.max_cool_off.map(ms),
            k.slow_call.map(ms),
            k.timeout.map(ms),
            k.ramp.map(ms),
        );
    let admission = (
        v.probes,
        v.success_threshold,
        v.max_concurrent,
        v.adaptive_concurrency,
        v.dry_run,
    ) == (
        k.probes,
        k.success_threshold,
        k.max_concurrent,
        k.adaptive,
        k.dry_run,
    );
    let hedge = (v.hedge, v.hedge_delay, v.hedge_budget)
        == (
            k.hedge.map(|h| h.hedges),
            k.hedge.map(|h| hedge_delay(h.delay)),
            k.hedge.and_then(|h| h.budget),
        );
    ensure!(
        rules && times && admission && hedge,
        "config() says {v:?}, the model runs {k:?}"
    );
    Ok(())
}

/// At the end of a case: every call ended (the last ones cancelled), time past every lease
/// and cool-off; then nothing is in flight, every bulkhead seat and probe slot is free, and
/// the breaker dropped leaves no task and no handle alive.
pub async fn at_rest(w: &mut World) -> Checked {
    while !w.lives.is_empty() || w.race.is_some() {
        w.step(&Op::Cancel(0)).await?;
    }
    // Past the longest cool-off and lease: nothing pending may remain but the probe task.
    w.step(&Op::Advance(25_000)).await?;
    after_step(w)?;
    let m = &w.model;
    ensure!(m.seats == 0, "the model holds {} seats at rest", m.seats);
    // Every seat free: a closed breaker admits `max_concurrent` calls at once.
    w.step(&Op::Manual(Manual::Reset)).await?;
    // (An adaptive limit is somewhere in 1..=max: one seat at least.)
    let k = &w.model.k;
    let seats = k.max_concurrent.or(k.adaptive.map(|_| 1)).unwrap_or(3);
    for _ in 0..seats {
        w.step(&Op::Start).await?;
        after_step(w)?;
    }
    ensure!(
        w.lives.len() as u32 == seats,
        "at rest, {} of {seats} calls admitted",
        w.lives.len()
    );
    while !w.lives.is_empty() {
        w.step(&Op::Cancel(0)).await?;
    }
    after_step(w)?;
    // (Every probe slot free: each half-open admission above was the model's.)
    w.drop_breaker().await?;
    w.drop_pool().await
}
