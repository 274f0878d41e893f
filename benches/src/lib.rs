//! The workloads shared by the criterion benchmarks (`benches/peers.rs`) and the callgrind
//! driver (`src/bin/cg.rs`), so both measure exactly the same code.
//!
//! Every implementation wraps the same dependency, [`op`], and every workload is one
//! `#[inline(never)]` method, so each measured call pays the same call/return overhead as the
//! bare baseline and the compiler cannot hoist work out of the measuring loop. Inputs and
//! results go through `black_box` at the call site.
//!
//! | implementation | closed instance | open instance |
//! | --- | --- | --- |
//! | `breaker` runtime API | `Config::default().threshold(5)` | same, tripped by 5 failures (cool-off 1 h) |
//! | `breaker`, a fleet member (feature `fleet`) | as the runtime API's, joined to a fleet on a loopback `redis-server` | same, tripped by 5 failures |
//! | `breaker` attribute | `#[circuit_breaker(threshold = 5)]` | same, tripped by 5 failures |
//! | failsafe 1.3 | `consecutive_failures(5, constant(1 h))` | same, tripped |
//! | recloser 1.4 | `error_rate(0.5)`, `closed_len(100)` | same with `closed_len(10)`, tripped |
//! | tower-circuitbreaker 0.2 | defaults (count window of 100, 50 %) | same, `force_open()` |
//! | tower-resilience-circuitbreaker 0.14 | `consecutive_failures(5)`, `wait_duration_in_open(1 h)` | same, tripped by 5 failures |
//! | seatbelt 0.11 | its defaults (10 % over 30 s), `min_throughput(5)`, `break_duration(1 h)` | same, tripped by 5 failures |
//!
//! tower-circuitbreaker has no blocking API: its "sync" rows poll its (boxed) future once with
//! a no-op waker; the future is ready at once because its `tokio::sync::Mutex` is uncontended.
//! tower-resilience-circuitbreaker has none either: its "sync" rows poll `poll_ready`, then the
//! (boxed) future of `call`, once each with a no-op waker. Its rows call `poll_ready` before
//! `call`, as the tower contract asks (its `poll_ready` is where an open circuit is judged);
//! tower-circuitbreaker's `poll_ready` only asks the inner service, which is always ready, so
//! its rows call `call` alone. seatbelt has only an async service (`layered::Service`): its
//! "sync" rows poll `execute`'s future once with a no-op waker.

use std::{
    cell::Cell,
    future::Future,
    hint::black_box,
    io,
    pin::pin,
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        Barrier, Mutex,
    },
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use breaker::{Breaker, CallError, Config};

/// The input that makes [`op`] fail.
pub const FAIL: u64 = u64::MAX;

/// A long cool-off, so an open breaker stays open for the whole benchmark.
pub const HOUR: Duration = Duration::from_secs(3600);

/// The dependency every implementation protects: succeeds unless `x == FAIL`. The error is a
/// `std::io::Error` from an `ErrorKind`, which does not allocate.
#[inline(always)]
pub fn op(x: u64) -> Result<u64, io::Error> {
    if x == FAIL {
        Err(io::Error::from(io::ErrorKind::ConnectionRefused))
    } else {
        Ok(x)
    }
}

/// [`op`] as a future (ready at its first poll).
#[inline(always)]
pub async fn op_async(x: u64) -> Result<u64, io::Error> {
    op(x)
}

/// Polls a future once with a no-op waker; panics if it is not ready.
#[inline(always)]
pub fn poll_once<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the future was expected to be ready at its first poll"),
    }
}

// ---------------------------------------------------------------------------------------
// Baselines
// ---------------------------------------------------------------------------------------

/// The reference costs.
pub struct Baselines {
    counter: AtomicU64,
    mutex: Mutex<u64>,
    // Made at first use: quanta calibrates its clock for a while at creation (how long
    // depends on the time, so its instructions would differ from run to run under
    // callgrind), and tick's needs a runtime.
    quanta: std::sync::OnceLock<quanta::Clock>,
    coarse: std::sync::OnceLock<(tick::Clock, tokio::runtime::Runtime)>,
}

impl Default for Baselines {
    fn default() -> Self {
        Self::new()
    }
}

impl Baselines {
    pub fn new() -> Self {
        Baselines {
            counter: AtomicU64::new(0),
            mutex: Mutex::new(0),
            quanta: std::sync::OnceLock::new(),
            coarse: std::sync::OnceLock::new(),
        }
    }

    /// The dependency, called directly.
    #[inline(never)]
    pub fn bare(&self, x: u64) -> Result<u64, io::Error> {
        op(x)
    }

    /// The dependency, plus two plain increments of a counter only this thread writes:
    /// thread-private work of the closed path's kind, which shares nothing between threads.
    /// Its 2-thread ratio is what this machine gives work that shares nothing.
    #[inline(never)]
    pub fn private_work(&self, x: u64) -> Result<u64, io::Error> {
        thread_local!(static COUNTS: [Cell<u64>; 2] = const { [Cell::new(0), Cell::new(0)] });
        COUNTS.with(|c| c[0].set(c[0].get() + 1));
        let r = op(x);
        COUNTS.with(|c| c[1].set(c[1].get() + 1));
        r
    }

    /// One `AtomicU64::fetch_add(1, Relaxed)` on a shared counter.
    #[inline(never)]
    pub fn atomic_add(&self) -> u64 {
        self.counter.fetch_add(1, Relaxed)
    }

    /// One read of the clock the breaker uses (`tokio::time::Instant::now()`).
    #[inline(never)]
    pub fn clock_read(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }

    /// One `std::time::Instant::now()` (what tokio's reads without its `test-util` feature).
    #[inline(never)]
    pub fn clock_std(&self) -> Instant {
        Instant::now()
    }

    /// One `CLOCK_MONOTONIC_COARSE` reading (tick's `fast-instant`, calibrated to an
    /// `Instant`): the kernel's last tick, 1-4 ms coarse, no TSC read.
    #[inline(never)]
    pub fn clock_coarse(&self) -> Instant {
        let (clock, _) = self.coarse.get_or_init(|| {
            let rt = current_thread();
            let _in_rt = rt.enter();
            let clock = tick::Clock::new_tokio().with_fast_instant(true);
            drop(_in_rt);
            (clock, rt)
        });
        clock.instant()
    }

    /// One `CLOCK_MONOTONIC_COARSE` reading through the vDSO, in nanoseconds (rustix's safe
    /// `clock_gettime`), with nothing around it.
    #[inline(never)]
    pub fn clock_coarse_raw(&self) -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        (t.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(t.tv_nsec as u64)
    }

    /// [`Self::runtime_flavor`]'s question, then the coarse reading when tokio's time cannot
    /// be paused here (no runtime, or a multi-thread one), else tokio's clock.
    #[inline(never)]
    pub fn clock_coarse_if_unpausable(&self) -> u64 {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            Err(e) if e.is_missing_context() => self.clock_coarse_raw(),
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => self.clock_coarse_raw(),
            _ => {
                let t = tokio::time::Instant::now();
                black_box(t);
                0
            }
        }
    }

    /// One `quanta::Clock::now()`: the TSC scaled to nanoseconds (`clock_gettime` where the
    /// TSC is not invariant).
    #[inline(never)]
    pub fn clock_quanta(&self) -> quanta::Instant {
        self.quanta.get_or_init(quanta::Clock::new).now()
    }

    /// Whether this thread is in a tokio runtime's context, and of which flavour (what a
    /// clock would ask to know that tokio's time cannot be paused here: only a
    /// current-thread runtime can be).
    #[inline(never)]
    pub fn runtime_flavor(&self) -> Option<tokio::runtime::RuntimeFlavor> {
        tokio::runtime::Handle::try_current()
            .ok()
            .map(|h| h.runtime_flavor())
    }

    /// One uncontended `std::sync::Mutex` lock, increment, unlock.
    #[inline(never)]
    pub fn mutex_lock(&self) -> u64 {
        let mut g = self.mutex.lock().unwrap_or_else(|p| p.into_inner());
        *g += 1;
        *g
    }

    /// The dependency as a bare async fn.
    pub async fn bare_async(&self, x: u64) -> Result<u64, io::Error> {
        op_async(x).await
    }
}

// ---------------------------------------------------------------------------------------
// breaker, runtime API
// ---------------------------------------------------------------------------------------

/// `breaker::Breaker` called directly.
pub struct Runtime {
    closed: Breaker,
    open: Breaker,
    forced: Breaker,
}

impl Runtime {
    /// Each call creates new breakers (with unique names), so criterion and the callgrind
    /// driver may build as many as they like.
    pub fn new() -> Self {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Relaxed);
        let config = || Config::default().threshold(5).cool_off(HOUR);
        let closed = Breaker::new(format!("bench::runtime::closed{n}"), config());
        let open = Breaker::new(format!("bench::runtime::open{n}"), config());
        for _ in 0..5 {
            let _ = open.call_sync(|| op(FAIL));
        }
        assert!(open.call_sync(|| op(1)).is_err(), "runtime: not tripped");
        let forced = Breaker::new(format!("bench::runtime::forced{n}"), config());
        forced.handle().force_open();
        Runtime {
            closed,
            open,
            forced,
        }
    }

    #[inline(never)]
    pub fn closed_sync(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.closed.call_sync(|| op(x))
    }

    #[inline(never)]
    pub fn open_sync(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.open.call_sync(|| op(x))
    }

    /// Rejection by a breaker forced open by hand (no clock read on that path).
    #[inline(never)]
    pub fn forced_sync(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.forced.call_sync(|| op(x))
    }

    pub async fn closed_async(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.closed.call(op_async(x)).await
    }

    pub async fn open_async(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.open.call(op_async(x)).await
    }

    /// The closed async call through an owned (`'static`) call future, as a spawned task or a
    /// tower service makes it: the breaker's handle cloned into the future (one reference
    /// count up, and down when the future ends).
    pub async fn owned_async(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.closed.clone().call_owned(op_async(x)).await
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------
// breaker, through the attribute
// ---------------------------------------------------------------------------------------

#[breaker::circuit_breaker(threshold = 5, cool_off = "1h")]
fn attr_closed_sync(x: u64) -> Result<u64, io::Error> {
    op(x)
}

#[breaker::circuit_breaker(threshold = 5, cool_off = "1h")]
fn attr_open_sync(x: u64) -> Result<u64, io::Error> {
    op(x)
}

#[breaker::circuit_breaker(threshold = 5, cool_off = "1h")]
async fn attr_closed_async(x: u64) -> Result<u64, io::Error> {
    op(x)
}

#[breaker::circuit_breaker(threshold = 5, cool_off = "1h")]
async fn attr_open_async(x: u64) -> Result<u64, io::Error> {
    op(x)
}

/// What a service with its own error type returns: its failure, or the breaker's refusal,
/// with no box (the `io::Error` the functions above convert a refusal into allocates, 400+
/// Ir, which hides what the attribute's breaker itself costs).
#[derive(Debug)]
pub enum OpError {
    /// The dependency failed.
    Failed(io::ErrorKind),
    /// The breaker refused the call.
    Refused(breaker::BreakerError),
}

impl From<breaker::BreakerError> for OpError {
    fn from(e: breaker::BreakerError) -> Self {
        OpError::Refused(e)
    }
}

#[breaker::circuit_breaker(threshold = 5, cool_off = "1h")]
fn attr_typed_open_sync(x: u64) -> Result<u64, OpError> {
    op(x).map_err(|e| OpError::Failed(e.kind()))
}

#[breaker::circuit_breaker(threshold = 5, cool_off = "1h")]
async fn attr_typed_open_async(x: u64) -> Result<u64, OpError> {
    op(x).map_err(|e| OpError::Failed(e.kind()))
}

/// Functions under `#[breaker::circuit_breaker]`: one static breaker per function.
pub struct Attr(());

impl Attr {
    /// `None` while the attribute does not put a breaker around the function yet (the
    /// placeholder macro returns the function unchanged): then five failures do not open it.
    pub fn new() -> Option<Self> {
        for _ in 0..5 {
            let _ = attr_open_sync(FAIL);
            let _ = poll_once(attr_open_async(FAIL));
            let _ = attr_typed_open_sync(FAIL);
            let _ = poll_once(attr_typed_open_async(FAIL));
        }
        let live = attr_open_sync(1).is_err();
        if !live {
            return None;
        }
        assert!(
            poll_once(attr_open_async(1)).is_err(),
            "attr: async not tripped"
        );
        Some(Attr(()))
    }

    #[inline(never)]
    pub fn closed_sync(&self, x: u64) -> Result<u64, io::Error> {
        attr_closed_sync(x)
    }

    #[inline(never)]
    pub fn open_sync(&self, x: u64) -> Result<u64, io::Error> {
        attr_open_sync(x)
    }

    pub async fn closed_async(&self, x: u64) -> Result<u64, io::Error> {
        attr_closed_async(x).await
    }

    pub async fn open_async(&self, x: u64) -> Result<u64, io::Error> {
        attr_open_async(x).await
    }

    /// A refusal into the function's own error type ([`OpError`]), which does not allocate:
    /// the attribute's breaker (a static name) at its own cost.
    #[inline(never)]
    pub fn open_sync_typed(&self, x: u64) -> Result<u64, OpError> {
        attr_typed_open_sync(x)
    }

    /// [`open_sync_typed`](Self::open_sync_typed), async.
    pub async fn open_async_typed(&self, x: u64) -> Result<u64, OpError> {
        attr_typed_open_async(x).await
    }
}

// ---------------------------------------------------------------------------------------
// failsafe 1.3
// ---------------------------------------------------------------------------------------

type FailsafeSm = failsafe::StateMachine<
    failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::Constant>,
    (),
>;

/// failsafe with its consecutive-failures policy.
pub struct Failsafe {
    closed: FailsafeSm,
    open: FailsafeSm,
}

fn failsafe_new() -> FailsafeSm {
    use failsafe::{backoff, failure_policy};
    failsafe::Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            5,
            backoff::constant(HOUR),
        ))
        .build()
}

impl Failsafe {
    pub fn new() -> Self {
        use failsafe::CircuitBreaker;
        let open = failsafe_new();
        for _ in 0..5 {
            let _ = open.call(|| op(FAIL));
        }
        assert!(open.call(|| op(1)).is_err(), "failsafe: not tripped");
        Failsafe {
            closed: failsafe_new(),
            open,
        }
    }

    #[inline(never)]
    pub fn closed_sync(&self, x: u64) -> Result<u64, failsafe::Error<io::Error>> {
        failsafe::CircuitBreaker::call(&self.closed, || op(x))
    }

    #[inline(never)]
    pub fn open_sync(&self, x: u64) -> Result<u64, failsafe::Error<io::Error>> {
        failsafe::CircuitBreaker::call(&self.open, || op(x))
    }

    pub async fn closed_async(&self, x: u64) -> Result<u64, failsafe::Error<io::Error>> {
        failsafe::futures::CircuitBreaker::call(&self.closed, op_async(x)).await
    }

    pub async fn open_async(&self, x: u64) -> Result<u64, failsafe::Error<io::Error>> {
        failsafe::futures::CircuitBreaker::call(&self.open, op_async(x)).await
    }
}

impl Default for Failsafe {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------
// recloser 1.4
// ---------------------------------------------------------------------------------------

/// recloser (ring buffers under crossbeam-epoch).
pub struct Recloser {
    closed: recloser::Recloser,
    open: recloser::Recloser,
    closed_async: recloser::AsyncRecloser,
    open_async: recloser::AsyncRecloser,
}

fn recloser_new(len: usize) -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(len)
        .open_wait(HOUR)
        .build()
}

fn recloser_tripped() -> recloser::Recloser {
    let r = recloser_new(10);
    // The ring judges only once it is full: len + 1 failures open it.
    for _ in 0..20 {
        let _ = r.call(|| op(FAIL));
    }
    assert!(r.call(|| op(1)).is_err(), "recloser: not tripped");
    r
}

impl Recloser {
    pub fn new() -> Self {
        Recloser {
            closed: recloser_new(100),
            open: recloser_tripped(),
            closed_async: recloser_new(100).into(),
            open_async: recloser_tripped().into(),
        }
    }

    #[inline(never)]
    pub fn closed_sync(&self, x: u64) -> Result<u64, recloser::Error<io::Error>> {
        self.closed.call(|| op(x))
    }

    #[inline(never)]
    pub fn open_sync(&self, x: u64) -> Result<u64, recloser::Error<io::Error>> {
        self.open.call(|| op(x))
    }

    pub async fn closed_async(&self, x: u64) -> Result<u64, recloser::Error<io::Error>> {
        self.closed_async.call(op_async(x)).await
    }

    pub async fn open_async(&self, x: u64) -> Result<u64, recloser::Error<io::Error>> {
        self.open_async.call(op_async(x)).await
    }
}

impl Default for Recloser {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------
// tower-circuitbreaker 0.2
// ---------------------------------------------------------------------------------------

/// [`op`] as a tower service.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpService;

impl tower::Service<u64> for OpService {
    type Response = u64;
    type Error = io::Error;
    type Future = std::future::Ready<Result<u64, io::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, x: u64) -> Self::Future {
        std::future::ready(op(x))
    }
}

pub type TowerCb = tower_circuitbreaker::CircuitBreaker<OpService, u64, u64, io::Error>;
pub type TowerError = tower_circuitbreaker::CircuitBreakerError<io::Error>;

pub fn tower_new() -> TowerCb {
    tower_circuitbreaker::circuit_breaker_builder::<u64, io::Error>()
        .wait_duration_in_open(HOUR)
        .build()
        .layer(OpService)
}

/// tower-circuitbreaker, a tower `Service` (its `call` takes `&mut self`).
pub struct Tower {
    closed: TowerCb,
    open: TowerCb,
}

impl Tower {
    pub fn new() -> Self {
        use tower::Service;
        let mut open = tower_new();
        poll_once(open.force_open());
        assert!(poll_once(open.call(1)).is_err(), "tower: not open");
        Tower {
            closed: tower_new(),
            open,
        }
    }

    #[inline(never)]
    pub fn closed_sync(&mut self, x: u64) -> Result<u64, TowerError> {
        poll_once(tower::Service::call(&mut self.closed, x))
    }

    #[inline(never)]
    pub fn open_sync(&mut self, x: u64) -> Result<u64, TowerError> {
        poll_once(tower::Service::call(&mut self.open, x))
    }

    pub async fn closed_async(&mut self, x: u64) -> Result<u64, TowerError> {
        tower::Service::call(&mut self.closed, x).await
    }

    pub async fn open_async(&mut self, x: u64) -> Result<u64, TowerError> {
        tower::Service::call(&mut self.open, x).await
    }
}

impl Default for Tower {
    fn default() -> Self {
        Self::new()
    }
}

/// Polls a future with a no-op waker until it is ready, yielding the thread in between (for
/// tower-circuitbreaker under contention, whose `tokio::sync::Mutex` may make it wait).
pub fn poll_spin<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// tower-circuitbreaker shared by threads: its `call` needs `&mut self` and the service is
/// not `Clone`, so threads share it behind a `std::sync::Mutex` held only while `call`
/// builds the boxed future (the future itself, which takes the breaker's own
/// `tokio::sync::Mutex`, is polled after the mutex is released, until ready).
pub struct TowerShared(Mutex<TowerCb>);

impl Default for TowerShared {
    fn default() -> Self {
        Self::new()
    }
}

impl TowerShared {
    pub fn new() -> Self {
        TowerShared(Mutex::new(tower_new()))
    }

    #[inline(never)]
    pub fn closed_sync(&self, x: u64) -> Result<u64, TowerError> {
        let fut = {
            let mut svc = self.0.lock().unwrap_or_else(|p| p.into_inner());
            tower::Service::call(&mut *svc, x)
        };
        poll_spin(fut)
    }
}

// ---------------------------------------------------------------------------------------
// tower-resilience-circuitbreaker 0.14
// ---------------------------------------------------------------------------------------

pub type ResilienceCb = tower_resilience_circuitbreaker::CircuitBreaker<
    OpService,
    tower_resilience_circuitbreaker::DefaultClassifier,
>;
pub type ResilienceError = tower_resilience_circuitbreaker::CircuitBreakerError<io::Error>;

/// Its closest configuration to the others': trip after 5 consecutive failures (its
/// `FailureModel::ConsecutiveFailures`, no sliding-window gating), stay open for an hour.
pub fn resilience_new() -> ResilienceCb {
    use tower::Layer;
    tower_resilience_circuitbreaker::CircuitBreakerLayer::builder()
        .consecutive_failures(5)
        .wait_duration_in_open(HOUR)
        .build()
        .expect("a valid tower-resilience config")
        .layer(OpService)
}

/// One request as the tower contract asks: `poll_ready` until ready, then `call`. (An open
/// circuit is judged in `poll_ready`, and `call` then refuses without taking the inner call.)
pub async fn resilience_request(svc: &mut ResilienceCb, x: u64) -> Result<u64, ResilienceError> {
    use tower::Service;
    std::future::poll_fn(|cx| svc.poll_ready(cx)).await?;
    svc.call(x).await
}

/// tower-resilience-circuitbreaker, the maintained successor of tower-circuitbreaker: a tower
/// `Service` (its `call` takes `&mut self` and returns a boxed future).
///
/// It is `Clone`, and clones share their circuit (an `Arc<tokio::sync::Mutex<Circuit>>` and
/// an atomic copy of the state): that is how its users give each task or thread its own
/// service, so the 2-thread scaling group gives each thread its own clone (see
/// [`on_threads_with`]) instead of sharing one behind a lock as it must for
/// tower-circuitbreaker ([`TowerShared`]).
#[derive(Clone)]
pub struct TowerResilience {
    closed: ResilienceCb,
    open: ResilienceCb,
}

impl TowerResilience {
    pub fn new() -> Self {
        let mut open = resilience_new();
        for _ in 0..5 {
            let _ = poll_once(resilience_request(&mut open, FAIL));
        }
        assert!(open.is_open(), "tower-resilience: not tripped");
        assert!(
            matches!(
                poll_once(resilience_request(&mut open, 1)),
                Err(ResilienceError::OpenCircuit)
            ),
            "tower-resilience: not refusing"
        );
        TowerResilience {
            closed: resilience_new(),
            open,
        }
    }

    #[inline(never)]
    pub fn closed_sync(&mut self, x: u64) -> Result<u64, ResilienceError> {
        poll_once(resilience_request(&mut self.closed, x))
    }

    /// [`Self::closed_sync`] for threads calling clones at once: the call's future may wait
    /// for the circuit's `tokio::sync::Mutex`, so it is polled until ready ([`poll_spin`]).
    #[inline(never)]
    pub fn closed_sync_contended(&mut self, x: u64) -> Result<u64, ResilienceError> {
        poll_spin(resilience_request(&mut self.closed, x))
    }

    #[inline(never)]
    pub fn open_sync(&mut self, x: u64) -> Result<u64, ResilienceError> {
        poll_once(resilience_request(&mut self.open, x))
    }

    pub async fn closed_async(&mut self, x: u64) -> Result<u64, ResilienceError> {
        resilience_request(&mut self.closed, x).await
    }

    pub async fn open_async(&mut self, x: u64) -> Result<u64, ResilienceError> {
        resilience_request(&mut self.open, x).await
    }
}

impl Default for TowerResilience {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------
// Part four's features, each at its own cost
// ---------------------------------------------------------------------------------------

#[breaker::circuit_breaker(threshold = 5, cool_off = "1h", retry = 3)]
async fn attr_retried_async(x: u64) -> Result<u64, io::Error> {
    op(x)
}

/// The retry wrapper on a call that succeeds at its first attempt: `Breaker::call_retried`
/// with `Config::retry(3)` (the budget's deposit, the verdict slot, the loop), the same
/// without `retry` configured (one attempt: the wrapper reads the policy and calls), and the
/// attribute's `retry = 3`. Compare with [`Runtime::closed_async`] and [`Attr::closed_async`].
pub struct Retried {
    retried: Breaker,
    unconfigured: Breaker,
}

impl Default for Retried {
    fn default() -> Self {
        Self::new()
    }
}

impl Retried {
    pub fn new() -> Self {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Relaxed);
        let config = || Config::default().threshold(5).cool_off(HOUR);
        Retried {
            retried: Breaker::new(format!("bench::retried{n}"), config().retry(3)),
            unconfigured: Breaker::new(format!("bench::retried_unconfigured{n}"), config()),
        }
    }

    /// A first attempt that succeeds, through `retry`.
    pub async fn first_attempt(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.retried.call_retried(|| op_async(x)).await
    }

    /// `call_retried` on a breaker without `retry`: one attempt.
    pub async fn unconfigured(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.unconfigured.call_retried(|| op_async(x)).await
    }

    /// `#[circuit_breaker(retry = 3)]`, a first attempt that succeeds.
    pub async fn attr_first_attempt(&self, x: u64) -> Result<u64, io::Error> {
        attr_retried_async(x).await
    }
}

/// A hedged call whose first attempt answers before the delay (issue 43's "+30 ns over a
/// plain call"): `Breaker::call_hedged` with `hedge(1)` and a fixed 20 ms delay (so the race
/// is armed from the first call: no samples needed), and the same on a breaker without
/// `hedge` (one attempt: the wrapper reads the policy and calls). Compare with
/// [`Runtime::closed_async`].
pub struct Hedged {
    hedged: Breaker,
    unconfigured: Breaker,
}

impl Default for Hedged {
    fn default() -> Self {
        Self::new()
    }
}

impl Hedged {
    pub fn new() -> Self {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Relaxed);
        let config = || Config::default().threshold(5).cool_off(HOUR);
        let delay = breaker::HedgeDelay::Fixed(Duration::from_millis(20));
        Hedged {
            hedged: Breaker::new(
                format!("bench::hedged{n}"),
                config().hedge(1).hedge_delay(delay),
            ),
            unconfigured: Breaker::new(format!("bench::hedged_unconfigured{n}"), config()),
        }
    }

    /// A first attempt that answers at once, before the delay, through `hedge(1)`.
    pub async fn first_answer(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.hedged.call_hedged(|| op_async(x)).await
    }

    /// `call_hedged` on a breaker without `hedge`: one attempt.
    pub async fn unconfigured(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.unconfigured.call_hedged(|| op_async(x)).await
    }
}

/// A closed breaker being `reconfigure`d (between two policies that both keep the fast path:
/// `threshold` 5 and 6, cool-off 1 h and 2 h) while this thread calls it: by another thread
/// in a loop ([`Reconfigured::new`], for wall time), or by this one between calls
/// ([`Reconfigured::here`], for callgrind, which runs one thread at a time in long slices:
/// a thread in a loop beside the measured one reconfigured only once or twice in 20 000
/// calls). Stopped and joined on drop.
pub struct Reconfigured {
    breaker: Breaker,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

fn reconfigured_config(n: u64) -> Config {
    let t = 5 + (n % 2) as u32;
    Config::default().threshold(t).cool_off(HOUR * t)
}

impl Default for Reconfigured {
    fn default() -> Self {
        Self::new()
    }
}

impl Reconfigured {
    /// With a thread that reconfigures the breaker in a loop until dropped.
    pub fn new() -> Self {
        let mut r = Self::here();
        let (breaker, stop) = (r.breaker.clone(), r.stop.clone());
        r.thread = Some(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                breaker
                    .reconfigure(reconfigured_config(n))
                    .expect("a valid config");
                n += 1;
            }
            n
        }));
        r
    }

    /// Without a thread: [`Self::reconfigure`] changes the configuration between calls.
    pub fn here() -> Self {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Relaxed);
        Reconfigured {
            breaker: Breaker::new(format!("bench::reconfigured{n}"), reconfigured_config(0)),
            stop: Default::default(),
            thread: None,
        }
    }

    /// Reconfigures the breaker to the `n`-th of the two policies.
    pub fn reconfigure(&self, n: u64) {
        self.breaker
            .reconfigure(reconfigured_config(n))
            .expect("a valid config");
    }

    /// A closed call, while the configuration changes.
    #[inline(never)]
    pub fn closed_sync(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.breaker.call_sync(|| op(x))
    }

    /// Stops the reconfiguring thread, if any; how many times it reconfigured.
    pub fn stop(&mut self) -> u64 {
        self.stop.store(true, Relaxed);
        self.thread
            .take()
            .map_or(0, |t| t.join().expect("the reconfiguring thread panicked"))
    }
}

impl Drop for Reconfigured {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A gRPC call (a `200` whose `grpc-status: 0` comes in its headers, "trailers-only") through
/// `CircuitBreakerLayer::grpc`, against the same HTTP service through the HTTP layer
/// (`CircuitBreakerLayer::new`, the HTTP preset) and tower-resilience's layer (its default
/// policy), and the service alone. Each request is `ready().await` then `call(req).await`, as
/// a tower client (tonic's `Channel`) makes it. Feature `grpc`.
#[cfg(feature = "grpc")]
pub mod layers {
    use std::{
        future::{ready, Ready},
        io,
    };

    use breaker::{tower::CircuitBreakerLayer, Breaker, Config};
    use tower::{util::ServiceFn, Layer, Service, ServiceExt};

    pub type Answer = Ready<Result<http::Response<String>, io::Error>>;
    pub type GrpcOp = ServiceFn<fn(http::Request<()>) -> Answer>;

    fn answer(_: http::Request<()>) -> Answer {
        let mut response = http::Response::new(String::new());
        response
            .headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("0"));
        ready(Ok(response))
    }

    pub fn service() -> GrpcOp {
        tower::service_fn(answer as fn(http::Request<()>) -> Answer)
    }

    /// One request through `svc`: ready, then call; whether it succeeded.
    pub async fn request<S>(svc: &mut S) -> bool
    where
        S: Service<http::Request<()>>,
    {
        match svc.ready().await {
            Ok(svc) => svc.call(http::Request::new(())).await.is_ok(),
            Err(_) => false,
        }
    }

    pub struct Layers {
        pub bare: GrpcOp,
        pub grpc: breaker::grpc::GrpcCircuitBreaker<GrpcOp>,
        pub http: breaker::tower::CircuitBreaker<GrpcOp>,
        pub resilience: tower_resilience_circuitbreaker::CircuitBreaker<
            GrpcOp,
            tower_resilience_circuitbreaker::DefaultClassifier,
        >,
    }

    impl Default for Layers {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Layers {
        pub fn new() -> Self {
            let config = || Config::default().threshold(5);
            Layers {
                bare: service(),
                grpc: CircuitBreakerLayer::grpc(Breaker::new("bench::grpc", config()))
                    .layer(service()),
                http: CircuitBreakerLayer::new(Breaker::new("bench::grpc_over_http", config()))
                    .layer(service()),
                resilience: tower_resilience_circuitbreaker::CircuitBreakerLayer::builder()
                    .build()
                    .expect("the default config")
                    .layer(service()),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// seatbelt 0.11 (Microsoft)
// ---------------------------------------------------------------------------------------

/// [`op`] as the inner service of a seatbelt stack (a function pointer: the closure type of
/// `Execute::new(|x| ..)` has no name to put in [`SeatbeltSvc`]).
pub type SeatbeltOp = fn(u64) -> std::future::Ready<Result<u64, io::Error>>;

fn seatbelt_op(x: u64) -> std::future::Ready<Result<u64, io::Error>> {
    std::future::ready(op(x))
}

/// A seatbelt circuit breaker over [`op`]: `layered`'s async `Service`.
pub type SeatbeltSvc =
    seatbelt::breaker::Breaker<u64, Result<u64, io::Error>, layered::Execute<SeatbeltOp>>;

/// What a seatbelt refusal returns: its docs' `rejected_input_error`, here an `io::Error` of
/// a kind of its own (made from an `ErrorKind`, which does not allocate).
pub const SEATBELT_REJECTED: io::ErrorKind = io::ErrorKind::ResourceBusy;

/// As its docs configure it (`Breaker::layer(name, &ResilienceContext::new(&clock))`, the
/// clock `tick::Clock::new_tokio()`, `recovery_with` judging an `Err` a failure,
/// `rejected_input_error`), with its defaults (a failure rate over 10 % within 30 s, half-open
/// `progressive`) but for two: `min_throughput(5)`, so that 5 failures open it as the others'
/// do (the default asks for 100 calls in the window), and `break_duration(1 h)`.
pub fn seatbelt_new(clock: &tick::Clock) -> SeatbeltSvc {
    use layered::Stack;
    let context = seatbelt::ResilienceContext::new(clock).name("bench");
    (
        seatbelt::breaker::Breaker::layer("breaker", &context)
            .recovery_with(|out: &Result<u64, io::Error>, _| match out {
                Ok(_) => seatbelt::RecoveryInfo::never(),
                Err(_) => seatbelt::RecoveryInfo::retry(),
            })
            .rejected_input_error(|_, _| io::Error::from(SEATBELT_REJECTED))
            .min_throughput(5)
            .break_duration(HOUR),
        layered::Execute::new(seatbelt_op as SeatbeltOp),
    )
        .into_service()
}

/// seatbelt's breaker: an async service only, so its "sync" rows poll `execute`'s future
/// once with a no-op waker (it is ready at once: the inner service is). Each call takes the
/// engine's `std::sync::Mutex` on entry and, when admitted, again on exit (with a clock read
/// each time).
pub struct Seatbelt {
    closed: SeatbeltSvc,
    open: SeatbeltSvc,
    // The runtime `Clock::new_tokio` spawns its timer driver on (never driven here: the
    // breaker reads the clock's instant and sets no timer).
    _rt: tokio::runtime::Runtime,
}

impl Seatbelt {
    pub fn new() -> Self {
        use layered::Service;
        let rt = current_thread();
        let clock = {
            let _in_rt = rt.enter();
            tick::Clock::new_tokio()
        };
        let open = seatbelt_new(&clock);
        for _ in 0..5 {
            let _ = poll_once(open.execute(FAIL));
        }
        assert!(
            matches!(poll_once(open.execute(1)), Err(e) if e.kind() == SEATBELT_REJECTED),
            "seatbelt: not tripped"
        );
        let closed = seatbelt_new(&clock);
        assert!(
            poll_once(closed.execute(1)).is_ok(),
            "seatbelt: closed is not"
        );
        Seatbelt {
            closed,
            open,
            _rt: rt,
        }
    }

    #[inline(never)]
    pub fn closed_sync(&self, x: u64) -> Result<u64, io::Error> {
        poll_once(layered::Service::execute(&self.closed, x))
    }

    #[inline(never)]
    pub fn open_sync(&self, x: u64) -> Result<u64, io::Error> {
        poll_once(layered::Service::execute(&self.open, x))
    }

    pub async fn closed_async(&self, x: u64) -> Result<u64, io::Error> {
        layered::Service::execute(&self.closed, x).await
    }

    pub async fn open_async(&self, x: u64) -> Result<u64, io::Error> {
        layered::Service::execute(&self.open, x).await
    }
}

impl Default for Seatbelt {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------
// breaker, a fleet member (feature `fleet`)
// ---------------------------------------------------------------------------------------

/// `redis-server` on a free loopback port, killed on drop.
#[cfg(feature = "fleet")]
struct RedisServer {
    child: std::process::Child,
    port: u16,
}

#[cfg(feature = "fleet")]
impl RedisServer {
    fn start() -> Result<Self, String> {
        use std::process::{Command, Stdio};
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("finding a free loopback port: {e}"))?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    "redis-server not found: the fleet rows need it \
                     (apt-get install -y redis-server)"
                        .to_owned()
                } else {
                    format!("starting redis-server: {e}")
                }
            })?;
        let server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while server.ask(b"PING\r\n").as_deref() != Some("+PONG") {
            if Instant::now() > deadline {
                return Err(format!("redis-server on port {port} did not answer PING"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(server)
    }

    /// One inline command, its reply's first line (`None` if Redis does not answer).
    fn ask(&self, command: &[u8]) -> Option<String> {
        use std::io::{BufRead, BufReader, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.write_all(command).ok()?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).ok()?;
        Some(line.trim_end().to_owned())
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

#[cfg(feature = "fleet")]
impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `breaker::Breaker`s that are members of a [`breaker::fleet::Fleet`] on a real
/// `redis-server` (started on a free loopback port, killed on drop), configured like
/// [`Runtime`]'s. The fleet's background task runs on a multi-thread tokio runtime with one
/// worker, kept in the struct; the calls are made on the caller's thread, as in [`Runtime`].
#[cfg(feature = "fleet")]
pub struct FleetMember {
    // Dropped in this order: the breakers leave, the fleet and its task stop, then Redis.
    closed: Breaker,
    open: Breaker,
    _fleet: breaker::fleet::Fleet,
    _rt: tokio::runtime::Runtime,
    _redis: RedisServer,
}

#[cfg(feature = "fleet")]
impl FleetMember {
    /// Starts `redis-server`, connects a fleet, makes the two breakers members and trips the
    /// open one; returns once the fleet's task has written that opening to Redis, so both
    /// joins have been handled. An error if `redis-server` is missing or does not answer.
    pub fn new() -> Result<Self, String> {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Relaxed);
        let redis = RedisServer::start()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("a tokio runtime: {e}"))?;
        let fleet = rt
            .block_on(breaker::fleet::Fleet::connect(&redis.url()))
            .map_err(|e| e.to_string())?;
        let config = || Config::default().threshold(5).cool_off(HOUR);
        let closed = Breaker::new(format!("bench::fleet::closed{n}"), config());
        let open_name = format!("bench::fleet::open{n}");
        let open = Breaker::new(open_name.clone(), config());
        fleet.join(&closed);
        fleet.join(&open);
        for _ in 0..5 {
            let _ = open.call_sync(|| op(FAIL));
        }
        assert!(open.call_sync(|| op(1)).is_err(), "fleet: not tripped");
        // The task handles its commands in order: closed's join, open's join, its opening.
        let exists = format!("EXISTS {{breaker:{open_name}}}:open\r\n");
        let deadline = Instant::now() + Duration::from_secs(20);
        while redis.ask(exists.as_bytes()).as_deref() != Some(":1") {
            if Instant::now() > deadline {
                return Err("the fleet did not write the opening to Redis".to_owned());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(closed.call_sync(|| op(1)).is_ok(), "fleet: closed is not");
        Ok(FleetMember {
            closed,
            open,
            _fleet: fleet,
            _rt: rt,
            _redis: redis,
        })
    }

    // The same bodies as `Runtime`'s, on purpose: callgrind counts inside a function chosen
    // by name (`--toggle-collect`), so the fleet rows need functions of their own.
    #[inline(never)]
    pub fn closed_sync(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.closed.call_sync(|| op(x))
    }

    #[inline(never)]
    pub fn open_sync(&self, x: u64) -> Result<u64, CallError<io::Error>> {
        self.open.call_sync(|| op(x))
    }
}

// ---------------------------------------------------------------------------------------
// Drivers
// ---------------------------------------------------------------------------------------

/// Runs `f` `iters` times on each of `threads` threads, all started together by a barrier,
/// and returns the longest per-thread time: per-thread cost × `iters`. Comparing the result
/// for 2 threads with the one for 1 thread gives the per-thread slowdown under contention.
pub fn on_threads<F>(threads: usize, iters: u64, f: F) -> Duration
where
    F: Fn(u64) + Sync,
{
    on_threads_with(threads, iters, || (), |_: &mut (), x| f(x))
}

/// [`on_threads`] with per-thread state: each thread calls `make` once, before the barrier
/// and outside the measured time, then `f(&mut its_state, i)`. For services that each thread
/// owns a clone of (tower-resilience-circuitbreaker: clones share one circuit).
pub fn on_threads_with<S, M, F>(threads: usize, iters: u64, make: M, f: F) -> Duration
where
    M: Fn() -> S + Sync,
    F: Fn(&mut S, u64) + Sync,
{
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut state = make();
                    // One call before the barrier, so first-call set-up (a stripe, an epoch
                    // handle) is not measured.
                    f(&mut state, 1);
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..iters {
                        f(&mut state, black_box(i));
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .max()
            .unwrap_or_default()
    })
}

/// Calls a callgrind driver (`cg`, `cg_otel`) makes before the `n` it is asked for, so the
/// count covers warm caches and lazily made state.
pub const WARM_UP: u64 = 1000;

/// The callgrind drivers' sync loop: `f` called `WARM_UP + n` times (`scripts/callgrind.sh`
/// takes the difference of two `n`).
#[inline(always)]
pub fn sync_loop<R>(n: u64, mut f: impl FnMut(u64) -> R) {
    for i in 0..WARM_UP + n {
        let _ = std::hint::black_box(f(std::hint::black_box(i)));
    }
}

/// The callgrind drivers' async loop: `$call` awaited `WARM_UP + n` times in one `block_on`.
#[macro_export]
macro_rules! async_loop {
    ($n:expr, |$x:ident| $call:expr) => {{
        let rt = $crate::current_thread();
        rt.block_on(async {
            for i in 0..$crate::WARM_UP + $n {
                let $x = ::std::hint::black_box(i);
                let _ = ::std::hint::black_box($call.await);
            }
        })
    }};
}

/// A tokio current-thread runtime with the time driver, as the async rows use.
pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

/// Runs `iters` awaits of `f(i)` inside one `block_on` and returns their total time, so the
/// runtime's own per-`block_on` cost is not measured.
pub fn async_loop<F, Fut>(rt: &tokio::runtime::Runtime, iters: u64, mut f: F) -> Duration
where
    F: FnMut(u64) -> Fut,
    Fut: Future,
{
    rt.block_on(async {
        let start = Instant::now();
        for i in 0..iters {
            black_box(f(black_box(i)).await);
        }
        start.elapsed()
    })
}
