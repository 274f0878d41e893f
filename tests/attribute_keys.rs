//! One test per key of `#[circuit_breaker]`, proving the value reaches the runtime. State is
//! read through `breaker::registry()`; time is tokio's paused clock.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breaker::{
    circuit_breaker, registry, BreakerError, CallError, Config, State, Transition, Verdict,
};
use tokio::time::advance;

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("dependency down")]
    Down,
    #[error("bad request")]
    BadRequest,
    #[error(transparent)]
    Breaker(#[from] BreakerError),
}

/// The dependency: down when `fail`.
fn down_if(fail: bool) -> Result<(), Error> {
    if fail {
        Err(Error::Down)
    } else {
        Ok(())
    }
}

impl Error {
    fn breaker(&self) -> Option<&BreakerError> {
        match self {
            Error::Breaker(e) => Some(e),
            _ => None,
        }
    }
}

fn state(name: &str) -> State {
    registry()
        .get(name)
        .expect("created on the first call")
        .state()
}

fn name(f: &str) -> String {
    format!("attribute_keys::{f}")
}

#[circuit_breaker(threshold = 3)]
async fn threshold_3(fail: bool) -> Result<(), Error> {
    down_if(fail)
}

#[tokio::test(start_paused = true)]
async fn threshold() {
    threshold_3(true).await.unwrap_err();
    threshold_3(true).await.unwrap_err();
    threshold_3(false).await.unwrap(); // a success resets the streak
    threshold_3(true).await.unwrap_err();
    threshold_3(true).await.unwrap_err();
    assert_eq!(state(&name("threshold_3")), State::Closed);
    threshold_3(true).await.unwrap_err();
    assert_eq!(state(&name("threshold_3")), State::Open);
}

#[tokio::test(start_paused = true)]
async fn defaults_are_five_failures_and_ten_seconds() {
    #[circuit_breaker]
    async fn plain() -> Result<(), Error> {
        Err(Error::Down)
    }
    // The default name is `module_path!()::fn_name` (a nested fn is in the test's module).
    for _ in 0..4 {
        plain().await.unwrap_err();
    }
    assert_eq!(state(&name("plain")), State::Closed);
    plain().await.unwrap_err();
    assert_eq!(state(&name("plain")), State::Open);
    let retry_in = plain().await.unwrap_err().breaker().unwrap().retry_in();
    assert_eq!(retry_in, Some(Duration::from_secs(10)));
}

#[circuit_breaker(failure_rate = 50, window = 10, min_calls = 4)]
async fn rate(fail: bool) -> Result<(), Error> {
    down_if(fail)
}

#[tokio::test(start_paused = true)]
async fn failure_rate_window_and_min_calls() {
    for _ in 0..3 {
        rate(true).await.unwrap_err(); // 100 % but fewer than `min_calls`
    }
    assert_eq!(state(&name("rate")), State::Closed);
    rate(true).await.unwrap_err();
    assert_eq!(state(&name("rate")), State::Open);
}

#[circuit_breaker(failure_rate = 50, window = "10s", min_calls = 2)]
async fn timed_window(fail: bool) -> Result<(), Error> {
    down_if(fail)
}

#[tokio::test(start_paused = true)]
async fn window_as_a_duration_forgets_old_calls() {
    timed_window(true).await.unwrap_err();
    advance(Duration::from_secs(20)).await; // the first failure left the window
    timed_window(true).await.unwrap_err();
    assert_eq!(state(&name("timed_window")), State::Closed);
    timed_window(true).await.unwrap_err();
    assert_eq!(state(&name("timed_window")), State::Open);
}

#[circuit_breaker(threshold = 1, slow_call = "2s")]
async fn slow(latency: Duration) -> Result<u32, Error> {
    tokio::time::sleep(latency).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn slow_call_counts_a_slow_success_as_a_failure() {
    assert_eq!(slow(Duration::from_millis(1_999)).await.unwrap(), 1);
    assert_eq!(state(&name("slow")), State::Closed);
    assert_eq!(slow(Duration::from_secs(2)).await.unwrap(), 1); // the caller still gets it
    assert_eq!(state(&name("slow")), State::Open);
    assert_eq!(registry().get(name("slow")).unwrap().stats().slow_calls, 1);
}

#[circuit_breaker(threshold = 1, cool_off = "5s", max_cool_off = "20s")]
async fn backoff(fail: bool) -> Result<(), Error> {
    down_if(fail)
}

#[tokio::test(start_paused = true)]
async fn cool_off_and_max_cool_off() {
    let n = name("backoff");
    backoff(true).await.unwrap_err();
    advance(Duration::from_millis(4_999)).await;
    assert_eq!(state(&n), State::Open);
    advance(Duration::from_millis(1)).await;
    assert_eq!(state(&n), State::HalfOpen);
    backoff(true).await.unwrap_err(); // the probe fails: 10 s now
    advance(Duration::from_secs(9)).await;
    assert_eq!(state(&n), State::Open);
    advance(Duration::from_secs(1)).await;
    backoff(true).await.unwrap_err(); // 20 s now, the cap
    let retry = backoff(false)
        .await
        .unwrap_err()
        .breaker()
        .unwrap()
        .retry_in();
    assert_eq!(retry, Some(Duration::from_secs(20)));
    advance(Duration::from_secs(20)).await;
    backoff(true).await.unwrap_err(); // capped: still 20 s
    let retry = backoff(false)
        .await
        .unwrap_err()
        .breaker()
        .unwrap()
        .retry_in();
    assert_eq!(retry, Some(Duration::from_secs(20)));
}

#[circuit_breaker(threshold = 1, cool_off = "5s", jitter = "1s")]
async fn jittered() -> Result<(), Error> {
    Err(Error::Down)
}

#[tokio::test(start_paused = true)]
async fn jitter_adds_up_to_its_value() {
    let mut extra = Vec::new();
    for _ in 0..5 {
        jittered().await.unwrap_err(); // opens (or, half-open, reopens)
        let retry = jittered()
            .await
            .unwrap_err()
            .breaker()
            .unwrap()
            .retry_in()
            .unwrap();
        assert!(
            retry >= Duration::from_secs(5) && retry <= Duration::from_secs(6),
            "{retry:?}"
        );
        extra.push(retry - Duration::from_secs(5));
        advance(Duration::from_secs(6)).await;
    }
    // Five random draws of 0..1 s (in nanoseconds) are not all zero.
    assert!(extra.iter().any(|d| !d.is_zero()), "{extra:?}");
}

static PROBED: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 1, cool_off = "1s", probes = 3, success_threshold = 4)]
async fn probed(fail: bool) -> Result<(), Error> {
    PROBED.fetch_add(1, SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    down_if(fail)
}

#[tokio::test(start_paused = true)]
async fn probes_admit_exactly_three_and_success_threshold_needs_four() {
    let n = name("probed");
    probed(true).await.unwrap_err();
    advance(Duration::from_secs(1)).await;
    let before = PROBED.load(SeqCst);
    let calls: Vec<_> = (0..10).map(|_| tokio::spawn(probed(false))).collect();
    let mut ok = 0;
    for c in calls {
        match c.await.unwrap() {
            Ok(()) => ok += 1,
            Err(e) => assert!(e.breaker().unwrap().is_open()),
        }
    }
    assert_eq!(ok, 3);
    assert_eq!(PROBED.load(SeqCst), before + 3);
    // Three successful probes of the four needed: still half-open.
    assert_eq!(state(&n), State::HalfOpen);
    probed(false).await.unwrap();
    assert_eq!(state(&n), State::Closed);
}

#[circuit_breaker(timeout = "100ms")]
async fn deadline(latency: Duration) -> Result<(), Error> {
    tokio::time::sleep(latency).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn timeout() {
    deadline(Duration::from_millis(99)).await.unwrap();
    let err = deadline(Duration::from_secs(30)).await.unwrap_err();
    let e = err.breaker().unwrap();
    assert!(e.is_timeout());
    assert_eq!(
        registry().get(name("deadline")).unwrap().stats().timeouts,
        1
    );
}

#[circuit_breaker(max_concurrent = 2)]
async fn bulkhead() -> Result<(), Error> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn max_concurrent() {
    let calls: Vec<_> = (0..3).map(|_| tokio::spawn(bulkhead())).collect();
    let mut full = 0;
    for c in calls {
        if let Err(e) = c.await.unwrap() {
            assert!(e.breaker().unwrap().is_full());
            full += 1;
        }
    }
    assert_eq!(full, 1);
}

fn is_down(e: &Error) -> bool {
    matches!(e, Error::Down)
}

#[circuit_breaker(threshold = 2, is_failure = is_down)]
async fn classified(e: Error) -> Result<(), Error> {
    Err(e)
}

#[tokio::test(start_paused = true)]
async fn is_failure_makes_other_errors_neutral() {
    let n = name("classified");
    classified(Error::Down).await.unwrap_err();
    for _ in 0..10 {
        // Neutral: neither a failure nor a success (the streak is not reset).
        assert!(matches!(
            classified(Error::BadRequest).await,
            Err(Error::BadRequest)
        ));
    }
    assert_eq!(state(&n), State::Closed);
    classified(Error::Down).await.unwrap_err();
    assert_eq!(state(&n), State::Open);
}

#[circuit_breaker(name = "attribute_keys::shared", threshold = 2)]
async fn shared_a() -> Result<(), Error> {
    Err(Error::Down)
}

static SHARED_B: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(name = "attribute_keys::shared", threshold = 2)]
fn shared_b() -> Result<(), Error> {
    SHARED_B.fetch_add(1, SeqCst);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn name_is_shared_between_functions() {
    shared_a().await.unwrap_err();
    shared_a().await.unwrap_err();
    // `shared_b` finds the breaker `shared_a` opened.
    assert!(shared_b().unwrap_err().breaker().unwrap().is_open());
    assert_eq!(SHARED_B.load(SeqCst), 0);
    assert_eq!(
        registry()
            .snapshot()
            .iter()
            .filter(|s| s.name == "attribute_keys::shared")
            .count(),
        1
    );
}

static TRANSITIONS: Mutex<Vec<(State, State)>> = Mutex::new(Vec::new());

fn record(t: &Transition) {
    if t.name == "attribute_keys::hooked" {
        TRANSITIONS.lock().unwrap().push((t.from, t.to));
    }
}

#[circuit_breaker(threshold = 1, cool_off = "1s", on_state_change = record)]
async fn hooked(fail: bool) -> Result<(), Error> {
    down_if(fail)
}

#[tokio::test(start_paused = true)]
async fn on_state_change_sees_every_transition() {
    hooked(true).await.unwrap_err();
    advance(Duration::from_secs(1)).await;
    hooked(false).await.unwrap();
    let seen = TRANSITIONS.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed)
        ]
    );
}

static CONFIG_BUILT: AtomicU32 = AtomicU32::new(0);

fn config_from_env() -> Config {
    CONFIG_BUILT.fetch_add(1, SeqCst);
    Config::default().threshold(1)
}

#[circuit_breaker(config = config_from_env(), name = "attribute_keys::configured")]
async fn configured() -> Result<(), Error> {
    Err(Error::Down)
}

#[tokio::test(start_paused = true)]
async fn config_is_built_once_on_the_first_call() {
    assert_eq!(CONFIG_BUILT.load(SeqCst), 0);
    configured().await.unwrap_err(); // threshold 1: opens
    assert_eq!(state("attribute_keys::configured"), State::Open);
    configured().await.unwrap_err();
    assert_eq!(CONFIG_BUILT.load(SeqCst), 1);
}

async fn cached(id: u32, err: CallError<Error>) -> Result<String, Error> {
    match err {
        CallError::Breaker(e) if e.is_open() => Ok(format!("cached {id}")),
        CallError::Breaker(e) => Err(e.into()),
        CallError::Inner(e) => Err(e),
    }
}

#[circuit_breaker(threshold = 1, fallback = cached)]
async fn with_fallback(id: u32) -> Result<String, Error> {
    let _ = id;
    Err(Error::Down)
}

#[tokio::test(start_paused = true)]
async fn fallback_gets_the_arguments_and_the_call_error() {
    // The dependency's own error goes to the fallback, which lets it surface.
    assert!(matches!(with_fallback(1).await, Err(Error::Down)));
    // Open: the fallback serves from the cache.
    assert_eq!(with_fallback(2).await.unwrap(), "cached 2");
}

struct Inventory {
    fallbacks: AtomicU32,
}

impl Inventory {
    #[circuit_breaker(threshold = 1, fallback = on_failure)]
    async fn reserve(&self, sku: &str, n: u32) -> Result<u32, Error> {
        let _ = (sku, n);
        Err(Error::Down)
    }

    async fn on_failure(&self, sku: &str, n: u32, err: CallError<Error>) -> Result<u32, Error> {
        assert_eq!(sku, "apple");
        self.fallbacks.fetch_add(1, SeqCst);
        match err {
            CallError::Inner(_) => Ok(0),
            CallError::Breaker(_) => Ok(n),
        }
    }

    #[circuit_breaker(threshold = 1, fallback = Self::count_on_failure)]
    fn count(self: Arc<Self>) -> Result<u32, Error> {
        Err(Error::Down)
    }

    fn count_on_failure(self: Arc<Self>, _err: CallError<Error>) -> Result<u32, Error> {
        Ok(self.fallbacks.load(SeqCst))
    }
}

#[tokio::test(start_paused = true)]
async fn fallback_on_methods() {
    let inv = Arc::new(Inventory {
        fallbacks: AtomicU32::new(0),
    });
    assert_eq!(inv.reserve("apple", 3).await.unwrap(), 0); // inner error
    assert_eq!(inv.reserve("apple", 3).await.unwrap(), 3); // open
    assert_eq!(inv.clone().count().unwrap(), 2);
}

static SYNC_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 2, cool_off = "1s")]
fn blocking(fail: bool) -> Result<u32, Error> {
    SYNC_CALLS.fetch_add(1, SeqCst);
    if fail {
        return Err(Error::Down);
    }
    Ok(1)
}

#[test]
fn sync_fn_outside_any_runtime() {
    blocking(true).unwrap_err();
    blocking(true).unwrap_err();
    assert!(blocking(false).unwrap_err().breaker().unwrap().is_open());
    assert_eq!(SYNC_CALLS.load(SeqCst), 2);
    assert_eq!(state(&name("blocking")), State::Open);
}

#[circuit_breaker(threshold = 1)]
async fn generic<T: Send>(value: T, fail: bool) -> Result<T, Error> {
    if fail {
        Err(Error::Down)
    } else {
        Ok(value)
    }
}

#[tokio::test(start_paused = true)]
async fn a_generic_function_has_one_breaker_for_all_instantiations() {
    generic(1u8, true).await.unwrap_err();
    assert!(generic("text", false)
        .await
        .unwrap_err()
        .breaker()
        .unwrap()
        .is_open());
}

#[circuit_breaker(key = url.split('/').nth(2).unwrap_or(""), threshold = 2)]
async fn deliver(url: &str, fail: bool) -> Result<(), Error> {
    down_if(fail)
}

#[tokio::test(start_paused = true)]
async fn key_gives_one_breaker_per_value_named_after_it() {
    let broken = "https://broken.example/hook";
    deliver(broken, true).await.unwrap_err();
    deliver(broken, true).await.unwrap_err();
    assert_eq!(state(&name("deliver[broken.example]")), State::Open);
    // Another host has its own breaker, still closed.
    deliver("https://fine.example/hook", false).await.unwrap();
    assert_eq!(state(&name("deliver[fine.example]")), State::Closed);
    let err = deliver(broken, false).await.unwrap_err();
    assert_eq!(
        err.breaker().unwrap().name(),
        name("deliver[broken.example]")
    );
}

struct Client {
    host: String,
    calls: AtomicU32,
}

impl Client {
    #[circuit_breaker(key = self.host, threshold = 1, fallback = offline)]
    async fn get(&self, fail: bool) -> Result<u32, Error> {
        self.calls.fetch_add(1, SeqCst);
        down_if(fail).map(|()| 1)
    }

    async fn offline(&self, _fail: bool, err: CallError<Error>) -> Result<u32, Error> {
        match err {
            CallError::Breaker(e) => {
                // A method is named after its type: `{module}::Client::get`.
                assert_eq!(e.name(), format!("{}[{}]", name("Client::get"), self.host));
                Ok(0)
            }
            CallError::Inner(e) => Err(e),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn key_on_a_string_field_of_self_gives_one_breaker_per_instance() {
    let a = Client {
        host: "a.example".to_owned(),
        calls: AtomicU32::new(0),
    };
    let b = Client {
        host: "b.example".to_owned(),
        calls: AtomicU32::new(0),
    };
    a.get(true).await.unwrap_err(); // opens a's breaker only
    assert_eq!(a.get(false).await.unwrap(), 0); // open: the fallback answers
    assert_eq!(a.calls.load(SeqCst), 1);
    assert_eq!(b.get(false).await.unwrap(), 1);
}

fn judge(r: &Result<u16, Error>) -> Verdict {
    match r {
        Ok(429) => Verdict::OpenFor(Duration::from_secs(30)),
        Ok(status) if *status >= 500 => Verdict::Failure,
        Ok(_) => Verdict::Success,
        Err(Error::BadRequest) => Verdict::Neutral,
        Err(_) => Verdict::Failure,
    }
}

#[circuit_breaker(classify = judge, threshold = 2, cool_off = "5s")]
async fn http_get(status: u16) -> Result<u16, Error> {
    Ok(status)
}

#[tokio::test(start_paused = true)]
async fn classify_judges_ok_answers_and_open_for_opens_at_once() {
    let n = name("http_get");
    assert_eq!(http_get(503).await.unwrap(), 503); // a failure, still returned as it is
    assert_eq!(state(&n), State::Closed);
    assert_eq!(http_get(429).await.unwrap(), 429);
    assert_eq!(state(&n), State::Open);
    let err = http_get(200).await.unwrap_err();
    assert_eq!(
        err.breaker().unwrap().retry_in(),
        Some(Duration::from_secs(30))
    );
}

#[circuit_breaker(key = tenant, threshold = 1, classify = |r: &Result<u32, Error>| {
    if matches!(r, Ok(0)) { Verdict::Failure } else { Verdict::Success }
})]
fn rows(tenant: u64, n: u32) -> Result<u32, Error> {
    Ok(n)
}

#[test]
fn classify_closure_on_a_keyed_plain_fn() {
    assert_eq!(rows(7, 0).unwrap(), 0);
    assert_eq!(state(&name("rows[7]")), State::Open);
    assert_eq!(rows(8, 1).unwrap(), 1);
    assert!(rows(7, 1).unwrap_err().breaker().unwrap().is_open());
}

#[async_trait::async_trait]
trait Store {
    async fn put(&self, key: String, value: u32) -> Result<u32, Error>;
}

struct Remote {
    fallbacks: AtomicU32,
}

#[async_trait::async_trait]
impl Store for Remote {
    #[circuit_breaker(threshold = 1, fallback = put_later)]
    async fn put(&self, key: String, value: u32) -> Result<u32, Error> {
        let _ = (&key, value);
        Err(Error::Down)
    }
}

impl Remote {
    async fn put_later(
        &self,
        key: String,
        value: u32,
        err: CallError<Error>,
    ) -> Result<u32, Error> {
        assert_eq!(key, "k");
        self.fallbacks.fetch_add(1, SeqCst);
        match err {
            CallError::Breaker(e) if e.is_open() => Ok(value),
            CallError::Breaker(e) => Err(e.into()),
            CallError::Inner(e) => Err(e),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn async_trait_methods_go_through_the_breaker_and_the_fallback() {
    let r = Remote {
        fallbacks: AtomicU32::new(0),
    };
    assert!(matches!(r.put("k".to_owned(), 5).await, Err(Error::Down)));
    assert_eq!(r.put("k".to_owned(), 5).await.unwrap(), 5); // open: the fallback answers
    assert_eq!(r.fallbacks.load(SeqCst), 2);
    // Named after the type the trait is implemented for.
    assert_eq!(state(&name("Remote::put")), State::Open);
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Region(u8);

impl breaker::BreakerKey for Region {
    fn fmt_key(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "region-{}", self.0)
    }
}

#[circuit_breaker(key = region, threshold = 1)]
fn in_region(region: &Region, fail: bool) -> Result<(), Error> {
    down_if(fail)
}

#[test]
fn a_key_type_of_ones_own_names_its_breakers() {
    in_region(&Region(3), true).unwrap_err();
    assert_eq!(state(&name("in_region[region-3]")), State::Open);
    in_region(&Region(4), false).unwrap();
}

#[circuit_breaker(threshold = 1, fleet = true)]
async fn fleet_member(fail: bool) -> Result<(), Error> {
    down_if(fail)
}

#[tokio::test(start_paused = true)]
async fn fleet_true_without_an_installed_fleet_stays_a_local_breaker() {
    fleet_member(true).await.unwrap_err();
    assert_eq!(state(&name("fleet_member")), State::Open);
    assert!(fleet_member(false)
        .await
        .unwrap_err()
        .breaker()
        .unwrap()
        .is_open());
}

#[circuit_breaker(threshold = 1, fallback = |id, _fail, err| match err {
    CallError::Breaker(_) => Ok(id),
    CallError::Inner(e) => Err(e),
})]
fn closure_fallback(id: u32, fail: bool) -> Result<u32, Error> {
    down_if(fail).map(|()| 0)
}

#[test]
fn a_closure_fallback_gets_the_arguments_and_the_call_error() {
    assert!(matches!(closure_fallback(1, true), Err(Error::Down)));
    assert_eq!(closure_fallback(2, false).unwrap(), 2); // open: the closure answers
}

#[cfg(feature = "http")]
mod http_preset {
    use super::*;

    #[circuit_breaker(classify = breaker::http::classify, threshold = 1)]
    async fn get(status: u16) -> Result<http::Response<()>, Error> {
        Ok(http::Response::builder().status(status).body(()).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn the_http_preset_judges_through_the_attribute() {
        let n = name("http_preset::get");
        assert_eq!(get(404).await.unwrap().status(), 404); // the caller's fault: neutral
        assert_eq!(state(&n), State::Closed);
        assert_eq!(get(503).await.unwrap().status(), 503); // returned as it is, counted a failure
        assert_eq!(state(&n), State::Open);
    }
}

mod judges {
    pub fn not_bad_request(e: &super::Error) -> bool {
        !matches!(e, super::Error::BadRequest)
    }
}

#[circuit_breaker(threshold = 1, is_failure = judges::not_bad_request)]
fn multi_segment_is_failure(fail: bool) -> Result<(), Error> {
    if fail {
        Err(Error::BadRequest)
    } else {
        Ok(())
    }
}

#[test]
fn is_failure_by_a_multi_segment_path() {
    multi_segment_is_failure(true).unwrap_err(); // neutral
    assert_eq!(state(&name("multi_segment_is_failure")), State::Closed);
}

/// A `config = …` that is invalid panics on the first call with the `ConfigError`, and on
/// every later call with the same message, not with "previously poisoned" (issue 10).
#[circuit_breaker(config = Config::default().threshold(0), name = "attribute_keys::bad_config")]
fn badly_configured() -> Result<(), Error> {
    Ok(())
}

#[test]
fn an_invalid_config_says_what_is_wrong_on_every_call() {
    for _ in 0..2 {
        let panic = std::panic::catch_unwind(badly_configured).unwrap_err();
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap();
        assert!(message.contains("threshold"), "{message}");
        assert!(!message.contains("poison"), "{message}");
    }
}

/// At the attribute's caps (`breaker-macros/src/args/limits.rs`): accepted at compile time,
/// and by the runtime on the first call (one past each is refused at compile time:
/// tests/ui/fail/probes_and_window_capped.rs).
#[circuit_breaker(
    probes = 1000,
    failure_rate = 50,
    window = 100000,
    adaptive_concurrency = 100000
)]
async fn at_the_caps() -> Result<(), Error> {
    Ok(())
}

/// The attribute's defaults: `max_cool_off` at the default `cool_off`, `min_calls` at the
/// default window's size.
#[circuit_breaker(max_cool_off = "10s", failure_rate = 50, min_calls = 100)]
async fn at_the_defaults() -> Result<(), Error> {
    Ok(())
}

/// The attribute caps `probes`, count windows and the adaptive limit, and checks
/// `max_cool_off` and `min_calls` against the defaults, with the runtime's own numbers.
#[tokio::test]
async fn the_attributes_caps_are_the_runtimes() {
    assert_eq!(Config::MAX_PROBES, 1_000);
    assert_eq!(Config::MAX_WINDOW_CALLS, 100_000);
    assert_eq!(Config::MAX_ADAPTIVE_CONCURRENCY, 100_000);
    at_the_caps().await.unwrap();
    at_the_defaults().await.unwrap();
    // The runtime's defaults are the macro's: just below them, the runtime refuses too.
    let refused = |config: Config| breaker::Breaker::try_new("limits", config).is_err();
    assert!(refused(
        Config::default().max_cool_off(Duration::from_millis(9_999))
    ));
    assert!(refused(Config::default().failure_rate(50).min_calls(101)));
}

#[circuit_breaker(key = host, threshold = 1, max_open = 50)]
async fn probe_host(host: &str, fail: bool) -> Result<(), Error> {
    let _ = host;
    down_if(fail)
}

/// `max_open = 50`: of four hosts that all fail, two open and two stay closed, still called.
#[tokio::test(start_paused = true)]
async fn max_open_keeps_most_keys_closed_when_all_fail() {
    let hosts = ["m1.example", "m2.example", "m3.example", "m4.example"];
    for h in hosts {
        probe_host(h, false).await.unwrap();
    }
    for h in hosts {
        probe_host(h, true).await.unwrap_err();
    }
    let open = hosts
        .iter()
        .filter(|h| state(&name(&format!("probe_host[{h}]"))) == State::Open)
        .count();
    assert_eq!(open, 2, "at most half of the four keys open");
    // The two held closed still reach the dependency: their error is the dependency's.
    let held = hosts
        .iter()
        .find(|h| state(&name(&format!("probe_host[{h}]"))) == State::Closed)
        .unwrap();
    assert!(probe_host(held, true)
        .await
        .unwrap_err()
        .breaker()
        .is_none());
}

/// Every key that sets a constant, as the attribute gives it (data applied to
/// `Config::DEFAULT` when the breaker is made: `__private::Set`).
#[circuit_breaker(
    name = "attribute_keys::every_constant_key",
    threshold = 3,
    failure_rate = 50,
    window = 20,
    min_calls = 10,
    slow_call = "2s",
    cool_off = "30s",
    max_cool_off = "5m",
    jitter = "250ms",
    probes = 3,
    success_threshold = 2,
    timeout = "1500us",
    max_concurrent = 16,
    throttle = 2.5,
    max_throttle = 90,
    throttle_window = "1m",
    ramp = "30s",
    dry_run = true,
    retry = 3,
    retry_budget = 20,
    backoff = "100ms",
    retry_within = "2s"
)]
async fn every_constant_key() -> Result<(), Error> {
    Ok(())
}

/// The keys the first one cannot take with it: a window in time, the adaptive limit (not
/// with `max_concurrent`), hedging (not with `retry`), at a percentile.
#[circuit_breaker(
    name = "attribute_keys::every_other_constant_key",
    failure_rate = 25,
    window = "10s",
    adaptive_concurrency = 64,
    hedge = 2,
    hedge_delay = "p95",
    hedge_budget = 5
)]
async fn every_other_constant_key() -> Result<(), Error> {
    Ok(())
}

/// A fixed hedging delay.
#[circuit_breaker(
    name = "attribute_keys::hedged_after_a_fixed_delay",
    hedge = 1,
    hedge_delay = "20ms"
)]
async fn hedged_after_a_fixed_delay() -> Result<(), Error> {
    Ok(())
}

/// A plain `fn`'s keys.
#[circuit_breaker(
    name = "attribute_keys::plain_with_keys",
    threshold = 4,
    cool_off = "7s"
)]
fn plain_with_keys() -> Result<(), Error> {
    Ok(())
}

/// Each function's breaker has the configuration its builders would make.
#[tokio::test]
async fn every_constant_key_reaches_the_breaker_as_its_builder_sets_it() {
    every_constant_key().await.unwrap();
    every_other_constant_key().await.unwrap();
    hedged_after_a_fixed_delay().await.unwrap();
    plain_with_keys().unwrap();
    let config = |name: &str| registry().get(name).expect("made").config();
    let s = Duration::from_secs;
    assert_eq!(
        config("attribute_keys::every_constant_key"),
        Config::default()
            .threshold(3)
            .failure_rate(50)
            .window_calls(20)
            .min_calls(10)
            .slow_call(s(2))
            .cool_off(s(30))
            .max_cool_off(s(300))
            .jitter(Duration::from_millis(250))
            .probes(3)
            .success_threshold(2)
            .timeout(Duration::from_micros(1500))
            .max_concurrent(16)
            .throttle(2.5)
            .max_throttle(90)
            .throttle_window(s(60))
            .ramp(s(30))
            .dry_run(true)
            .retry(3)
            .retry_budget(20)
            .backoff(Duration::from_millis(100))
            .retry_within(s(2))
    );
    assert_eq!(
        config("attribute_keys::every_other_constant_key"),
        Config::default()
            .failure_rate(25)
            .window_duration(s(10))
            .adaptive_concurrency(64)
            .hedge(2)
            .hedge_delay(breaker::HedgeDelay::Percentile(95.0))
            .hedge_budget(5)
    );
    assert_eq!(
        config("attribute_keys::hedged_after_a_fixed_delay"),
        Config::default()
            .hedge(1)
            .hedge_delay(breaker::HedgeDelay::Fixed(Duration::from_millis(20)))
    );
    assert_eq!(
        config("attribute_keys::plain_with_keys"),
        Config::default().threshold(4).cool_off(s(7))
    );
}
