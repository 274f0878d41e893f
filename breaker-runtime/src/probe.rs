//! Recovery without traffic (`Config::probe`): when a cool-off ends and no call comes to
//! probe, the breaker runs its probe itself, as a tokio task started at each opening, only
//! for a breaker that has one. The probe holds a probe slot and its lease as a call would,
//! so under a fleet's gate only the instance granted the fleet's probe lease runs it, and
//! its outcome decides as a call's would: a success closes the breaker (per
//! `success_threshold`, probing again while half-open), a failure reopens it with its
//! backoff (and the next opening starts the next probe).

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use crate::{
    core::{probe::Turn, Outcome, Permit},
    shared::Shared,
    Config, ConfigError, Verdict,
};

/// How soon a probe the fleet's gate holds back asks again. It told the fleet it waits (as
/// a refused call does); what ends the wait is the fleet's grant, another instance's probe
/// closing or reopening this breaker, or the fleet releasing its gate.
const GATED_RETRY: Duration = Duration::from_millis(50);

/// A probe's `Result`: `Ok` is a success, `Err` a failure.
impl<T, E> From<Result<T, E>> for Verdict {
    fn from(r: Result<T, E>) -> Verdict {
        match r {
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::Failure,
        }
    }
}

/// A keyed breaker's keys share one configuration: a probe there would not know its key.
pub(crate) fn refuse_keyed(config: &Config) -> Result<(), ConfigError> {
    match config.probe {
        Some(_) => Err(ConfigError::new(
            "probe",
            "is not for a keyed breaker: one probe cannot tell which key recovered",
        )),
        None => Ok(()),
    }
}

/// Makes `shared` start its own probe at each opening (a breaker made with a probe, or
/// given one by `reconfigure`); an opening already under way gets one now.
pub(crate) fn install(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    shared
        .core
        .set_prober(Box::new(move |opened| spawn(weak.clone(), opened)));
}

/// Starts the probe of the opening of generation `opened`, if the breaker still has a
/// probe and the thread is in a tokio runtime.
pub(crate) fn spawn(weak: Weak<Shared>, opened: u64) {
    let Some(shared) = weak.upgrade() else {
        return;
    };
    if shared.core.live.resolved().config.probe.is_none() {
        return; // taken away by `reconfigure`
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(run(weak, opened));
        }
        Err(_) => tracing::warn!(
            target: "breaker",
            breaker = shared.core.name.as_str(),
            "circuit breaker `{}` opened outside a tokio runtime: its probe did not start \
             (the next call after the cool-off probes instead)",
            shared.core.name
        ),
    }
}

/// The probe task of one opening: waits out the cool-off holding only a weak reference,
/// then probes until the opening is decided or a call holds the probe.
async fn run(weak: Weak<Shared>, opened: u64) {
    loop {
        let turn = {
            let Some(shared) = weak.upgrade() else {
                return; // the breaker is gone
            };
            shared.core.probe_turn(opened, &shared.clock)
        };
        match turn {
            Turn::Done => return,
            Turn::Wait(left) => tokio::time::sleep(Duration::from_nanos(left)).await,
            Turn::Gated => tokio::time::sleep(GATED_RETRY).await,
            Turn::Go(admission) => {
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                // Dropped unreported (the task cancelled, the probe panicked), the permit
                // gives the slot back.
                let permit = Permit::admitted_in(&*shared, admission);
                let Some(probe) = shared.core.live.resolved().config.probe.clone() else {
                    return;
                };
                let outcome = match shared.core.live.timeout() {
                    Some(limit) => match tokio::time::timeout(limit, probe()).await {
                        Ok(verdict) => Outcome::from(verdict),
                        Err(_) => Outcome::Timeout,
                    },
                    None => Outcome::from(probe().await),
                };
                permit.finish(outcome);
            }
        }
    }
}
