//! Recovery without traffic (`Config::probe`): when a cool-off ends and no call comes to
//! probe, the breaker runs its probe itself, in a tokio task started at an opening, only for
//! a breaker that has one. The probe holds a probe slot and its lease as a call would, so
//! under a fleet's gate only the instance granted the fleet's probe lease runs it, and its
//! outcome decides as a call's would: a success closes the breaker (per
//! `success_threshold`, probing again while half-open), a failure reopens it with its
//! backoff, and the task probes that opening too.
//!
//! Bounded: one task per breaker at a time, which lives while the breaker is open or
//! half-open. It holds the breaker only by a weak reference, and stops at once when the
//! breaker is dropped (its last clone and handle), cancelling a probe under way. A probe
//! that has not answered within its lease (the `timeout`, else the base cool-off) is a
//! timeout, and one that panics is a failure: both reopen the breaker.

use std::{
    future::Future,
    panic::{catch_unwind, AssertUnwindSafe},
    pin::Pin,
    sync::{Arc, Weak},
    task::{Context, Poll},
    time::Duration,
};

use crate::{
    core::{
        probe::{Stop, Turn},
        Admission, Outcome,
    },
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

/// Makes `shared` start its own probe task at each opening (a breaker made with a probe, or
/// given one by `reconfigure`); an opening already under way gets one now.
pub(crate) fn install(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    let prober = weak.clone();
    shared
        .core
        .set_prober(Box::new(move || spawn(prober.clone())));
    if matches!(
        shared.core.peek(),
        crate::State::Open | crate::State::HalfOpen
    ) {
        spawn(weak);
    }
}

/// Starts the probe task, if the breaker still has a probe, no task runs for it, and the
/// thread is in a tokio runtime.
pub(crate) fn spawn(weak: Weak<Shared>) {
    let Some(shared) = weak.upgrade() else {
        return;
    };
    if shared.core.live.resolved().config.probe.is_none() {
        return; // taken away by `reconfigure`
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            target: "breaker",
            breaker = shared.core.name.as_str(),
            "circuit breaker `{}` opened outside a tokio runtime: its probe did not start \
             (the next call after the cool-off probes instead)",
            shared.core.name
        );
        return;
    };
    let Some(stop) = shared.core.probe_task() else {
        return; // the running task probes this opening too
    };
    drop(shared);
    runtime.spawn(run(weak, stop));
}

/// The probe task: probes until there is nothing to probe, or stops at once when the
/// breaker is dropped (its [`Stop`] says so), dropping a probe under way.
async fn run(weak: Weak<Shared>, mut stop: Stop) {
    let mut probing = std::pin::pin!(probe_while_open(weak));
    std::future::poll_fn(|cx| {
        if Pin::new(&mut stop).poll(cx).is_ready() {
            return Poll::Ready(()); // the breaker is gone (or the task stood down)
        }
        probing.as_mut().poll(cx)
    })
    .await
}

/// Probes while the breaker is open or half-open, holding it only by `weak`: upgraded for
/// each step, never across an await.
async fn probe_while_open(weak: Weak<Shared>) {
    loop {
        let turn = {
            let Some(shared) = weak.upgrade() else {
                return; // the breaker is gone
            };
            shared.core.probe_turn(&shared.clock)
        };
        match turn {
            Turn::Done => return,
            Turn::Wait(left) => tokio::time::sleep(Duration::from_nanos(left)).await,
            Turn::Gated => tokio::time::sleep(GATED_RETRY).await,
            Turn::Go(admission) => probe_once(&weak, admission).await,
        }
    }
}

/// Runs the probe once, within its lease, and reports its outcome.
async fn probe_once(weak: &Weak<Shared>, admission: Admission) {
    // Dropped unreported (the task cancelled), it gives the slot back.
    let held = Held {
        weak: weak.clone(),
        admission: Some(admission),
    };
    let (probe, lease, name) = {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let settings = shared.core.live.resolved();
        let probe = settings.config.probe.clone();
        (probe, settings.policy.lease(), shared.core.name.clone())
    };
    let Some(probe) = probe else {
        return; // taken away by `reconfigure`: the slot is given back
    };
    // Feature `otel`: the probe's span, the probe made and polled inside it; it records the
    // outcome as it goes (`cancelled` if the task stops mid-probe).
    #[cfg(feature = "otel")]
    let mut traced = crate::traced::Probed::begin(weak.upgrade().as_deref());
    let made = {
        #[cfg(feature = "otel")]
        let _entered = traced.span.enter();
        catch_unwind(AssertUnwindSafe(|| probe()))
    };
    let (outcome, _panicked) = match made {
        Ok(future) => {
            let lease = Duration::from_nanos(lease);
            #[cfg(feature = "otel")]
            let future = tracing::Instrument::instrument(Caught(future), traced.span.clone());
            #[cfg(not(feature = "otel"))]
            let future = Caught(future);
            match tokio::time::timeout(lease, future).await {
                Ok(Ok(verdict)) => (Outcome::from(verdict), false),
                Ok(Err(())) => (panicked(&name), true),
                Err(_) => (Outcome::Timeout, false),
            }
        }
        Err(_) => (panicked(&name), true),
    };
    #[cfg(feature = "otel")]
    traced.ended(outcome, _panicked);
    held.finish(outcome);
}

/// A panicking probe is a failed probe (the panic itself was printed by the panic hook).
#[cold]
fn panicked(name: &crate::Name) -> Outcome {
    tracing::error!(
        target: "breaker",
        breaker = name.as_str(),
        "circuit breaker `{name}`: its probe panicked; counted as a failed probe"
    );
    Outcome::Failure
}

/// The probe's future, its panic caught (`Err`); not polled again after one.
struct Caught(Pin<Box<dyn Future<Output = Verdict> + Send>>);

impl Future for Caught {
    type Output = Result<Verdict, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = &mut self.0;
        match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(poll) => poll.map(Ok),
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

/// The probe's admission, held by a weak reference (a `Permit` would hold the breaker):
/// reported once, `Cancelled` if dropped unreported; nothing to report to once the breaker
/// is gone.
struct Held {
    weak: Weak<Shared>,
    admission: Option<Admission>,
}

impl Held {
    fn finish(mut self, outcome: Outcome) {
        self.report(outcome);
    }

    fn report(&mut self, outcome: Outcome) {
        if let (Some(admission), Some(shared)) = (self.admission.take(), self.weak.upgrade()) {
            shared.core.finish(admission, outcome, &shared.clock);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.report(crate::core::Outcome::Cancelled);
    }
}
