//! A tower layer (feature `tower`): every request through a [tower service](https://docs.rs/tower-service/0.3/tower_service/trait.Service.html) goes through a breaker.
//!
//! ```
//! use std::time::Duration;
//! use breaker::{tower::CircuitBreakerLayer, Breaker, CallError, Config};
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let breaker = Breaker::new("docs::tower", Config::default().threshold(1));
//! let svc = ServiceBuilder::new()
//!     .layer(CircuitBreakerLayer::new(breaker.clone()))
//!     .service(service_fn(|n: u32| async move {
//!         if n > 0 { Ok(n) } else { Err(std::io::Error::other("zero")) }
//!     }));
//!
//! assert_eq!(svc.clone().oneshot(1).await.unwrap(), 1);
//! assert!(matches!(svc.clone().oneshot(0).await, Err(CallError::Inner(_)))); // trips it
//! // Open: the service is not called, the rejection comes from `call`'s future.
//! assert!(matches!(svc.clone().oneshot(1).await, Err(CallError::Breaker(e)) if e.is_open()));
//! # }
//! ```
//!
//! - **Where a rejection happens**: in the response future returned by `call`, as
//!   [`CallError::Breaker`]; never as an `Err` from `poll_ready` (a tower service that fails
//!   `poll_ready` must be thrown away). `poll_ready` is the inner service's own, so an open
//!   breaker over a ready service is ready; behind a balancer,
//!   [`ready_when_closed`](CircuitBreakerLayer::ready_when_closed) makes it `Pending` while
//!   the breaker refuses.
//! - **The dependency is not touched while open**: the readied inner service is moved into the
//!   response future (the [`Service`] docs' "be careful when cloning inner services" pattern,
//!   hence `S: Clone`) and called only once the breaker admits the call; a refused request
//!   is dropped unsent, and with it whatever the inner service reserved in `poll_ready`.
//! - **The response future** is `'static` and `Send` (when the service, its future and the
//!   request are), so it can be spawned; it is built on
//!   [`Breaker::call_owned_classified`](crate::Breaker::call_owned_classified), allocates
//!   nothing of its own, and dropping it gives back its half-open probe slot and bulkhead
//!   slot.
//! - **Judging**: by default [`DefaultClassify`]: an `http::Response` by the
//!   [`http` preset](crate::http) (so an `Ok(503)` is a failure and a 429 opens for exactly
//!   its `Retry-After`, even one shorter than `cool_off`), and one whose `content-type` is
//!   `application/grpc…` (a tonic `Channel`'s) by the gRPC table of `breaker::grpc`, read
//!   from its headers (a Trailers-Only code; a `200` whose code comes in the trailers is a
//!   success here: `CircuitBreakerLayer::grpc`, feature `grpc`, reads the trailers too); any
//!   other response type by `Ok` = success, `Err` = failure. Replace it with
//!   [`.classify(…)`](CircuitBreakerLayer::classify), any
//!   `Fn(&Result<Response, Error>) -> Verdict + Clone`.
//! - **A streamed body**: the call is the response future, which ends at the response
//!   headers; `timeout`, `slow_call` and the abandoned rule time it that far, and the verdict
//!   is the headers' (the status). The body is the caller's to read and to time: a body read
//!   for a long time is no slow call, and one dropped before its end counts for nothing.
//! - **Which breaker**: one ([`CircuitBreakerLayer::new`]) or one per key of a
//!   [`KeyedBreaker`] picked from each request ([`CircuitBreakerLayer::keyed`]). Clones of
//!   the layer and of the service share the breakers.

use std::{
    borrow::Borrow,
    fmt,
    future::Future,
    hash::Hash,
    pin::Pin,
    task::{ready, Context, Poll},
};

use tower_layer::Layer;
use tower_service::Service;

use breaker_runtime::Classify as Judge;

use crate::{Breaker, BreakerKey, CallError, CallFuture, KeyedBreaker, Verdict};

/// A [tower layer](https://docs.rs/tower-layer/0.3/tower_layer/trait.Layer.html) that puts a breaker in front of a service; see the [module docs](self).
///
/// `T` picks the breaker of each request ([`Breaker`] itself, or [`Keyed`]); `C` judges each
/// finished call ([`DefaultClassify`], or what [`classify`](Self::classify) gave).
#[derive(Clone)]
pub struct CircuitBreakerLayer<T = Breaker, C = DefaultClassify> {
    pick: T,
    classify: C,
    ready_when_closed: bool,
}

impl CircuitBreakerLayer {
    /// Every request goes through `breaker` (clones of the layer and of its services share it).
    ///
    /// ```
    /// use breaker::{tower::CircuitBreakerLayer, Breaker, Config};
    /// use tower::{service_fn, ServiceBuilder, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let inventory = Breaker::new("docs::layer_new", Config::default());
    /// let svc = ServiceBuilder::new()
    ///     .layer(CircuitBreakerLayer::new(inventory.clone()))
    ///     .service(service_fn(|sku: u32| async move { Ok::<_, std::io::Error>(sku * 2) }));
    /// assert_eq!(svc.oneshot(21).await.unwrap(), 42);
    /// assert_eq!(inventory.stats().successes, 1);
    /// # }
    /// ```
    pub fn new(breaker: Breaker) -> Self {
        CircuitBreakerLayer {
            pick: breaker,
            classify: DefaultClassify,
            ready_when_closed: false,
        }
    }
}

impl<C> CircuitBreakerLayer<Breaker, C> {
    /// `poll_ready` is `Pending` while the breaker refuses calls (open, or forced open), and
    /// wakes when it admits again, so a balancer routes around an open endpoint instead of
    /// collecting its refusals: tower's `p2c` chooses only among ready services. Opt-in:
    /// without a balancer, a caller waiting on `ready()` would wait out the cool-off instead
    /// of getting a refusal (and its fallback) at once.
    ///
    /// A waiting `poll_ready` is woken at once by every change that may make the breaker
    /// admit, not at the old deadline: the end of its open time, a
    /// [`reset`](crate::Handle::reset), [`disable`](crate::Handle::disable), a probe's
    /// success (another clone's request, or the breaker's own
    /// [`probe`](crate::Config::probe)), a probe slot given back, its fleet's closing or
    /// grant, a reconfiguration (a dry run refuses nothing, so it is ready). Half-open is
    /// ready while a probe slot is free (the next request may be the probe). Each waiting
    /// service holds one registration with the breaker, dropped when it is ready or dropped;
    /// the calls themselves pay nothing for it. One breaker only: a keyed layer's breaker
    /// depends on the request, which `poll_ready` does not see.
    ///
    /// ```
    /// use breaker::{tower::CircuitBreakerLayer, Breaker, Config};
    ///
    /// let endpoint = Breaker::new("docs::endpoint_a", Config::default().threshold(3));
    /// let layer = CircuitBreakerLayer::new(endpoint).ready_when_closed();
    /// // Each endpoint of a `tower::balance::p2c::Balance` gets its own layer.
    /// # let _ = layer;
    /// ```
    pub fn ready_when_closed(mut self) -> Self {
        self.ready_when_closed = true;
        self
    }
}

impl<K, F> CircuitBreakerLayer<Keyed<K, F>> {
    /// Each request goes through the breaker of its key, `key(&request)`: one breaker per
    /// host, tenant or shard, created on first use, bounded by the keyed breaker's
    /// `max_keys` and `idle`. `key` returns the key type itself (`K`, or anything `K` borrows
    /// as, as with `HashMap::get`); on a hot path prefer keys that are cheap to make, such
    /// as an `http::uri::Authority` (its clone shares the bytes) or an integer, over a
    /// `String` built per request.
    ///
    /// A closure names the request type of the service it goes over (here
    /// `http::Request<String>`; a hyper client's body type, say, for a hyper client):
    ///
    /// ```
    /// use breaker::{tower::CircuitBreakerLayer, Config, KeyedBreaker};
    /// use tower::{service_fn, ServiceBuilder, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let per_host = KeyedBreaker::<String>::new("docs::hosts", Config::default());
    /// let svc = ServiceBuilder::new()
    ///     .layer(CircuitBreakerLayer::keyed(per_host.clone(), |req: &http::Request<String>| {
    ///         req.uri().authority().map_or_else(String::new, |a| a.to_string())
    ///     }))
    ///     .service(service_fn(|_req: http::Request<String>| async {
    ///         Ok::<_, std::io::Error>(http::Response::new(String::new()))
    ///     }));
    /// let req = http::Request::builder().uri("http://a.example/x").body(String::new()).unwrap();
    /// assert_eq!(svc.oneshot(req).await.unwrap().status(), 200);
    /// assert!(per_host.contains("a.example"));
    /// # }
    /// ```
    pub fn keyed<Req, Q>(keyed: KeyedBreaker<K>, key: F) -> Self
    where
        K: BreakerKey + Borrow<Q>,
        F: Fn(&Req) -> Q,
        Q: Hash + Eq + ToOwned<Owned = K>,
    {
        CircuitBreakerLayer {
            pick: Keyed::new(keyed, key),
            classify: DefaultClassify,
            ready_when_closed: false,
        }
    }
}

impl<T, C> CircuitBreakerLayer<T, C> {
    /// Judges every finished call with `classify` instead of the default: any
    /// `Fn(&Result<Response, Error>) -> Verdict` (cloned into each response future) or a
    /// type implementing [`Classify`]. Classification changes what the breaker counts, never
    /// what the caller gets.
    ///
    /// ```
    /// use breaker::{tower::CircuitBreakerLayer, Breaker, Config, Verdict};
    ///
    /// // A gRPC-ish service: "unavailable" replies are failures, though they are `Ok`.
    /// let layer = CircuitBreakerLayer::new(Breaker::new("docs::grpc", Config::default()))
    ///     .classify(|r: &Result<&'static str, std::io::Error>| match r {
    ///         Ok("unavailable") | Err(_) => Verdict::Failure,
    ///         Ok(_) => Verdict::Success,
    ///     });
    /// # let _ = layer;
    /// ```
    pub fn classify<C2>(self, classify: C2) -> CircuitBreakerLayer<T, C2> {
        CircuitBreakerLayer {
            pick: self.pick,
            classify,
            ready_when_closed: self.ready_when_closed,
        }
    }
}

impl<S, T: Clone, C: Clone> Layer<S> for CircuitBreakerLayer<T, C> {
    type Service = CircuitBreaker<S, T, C>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreaker {
            inner,
            pick: self.pick.clone(),
            classify: self.classify.clone(),
            ready_when_closed: self.ready_when_closed,
            waiting: None,
        }
    }
}

impl<T: fmt::Debug, C> fmt::Debug for CircuitBreakerLayer<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerLayer")
            .field("pick", &self.pick)
            .finish_non_exhaustive()
    }
}

/// The service [`CircuitBreakerLayer`] makes: `inner` behind a breaker.
pub struct CircuitBreaker<S, T = Breaker, C = DefaultClassify> {
    inner: S,
    pick: T,
    classify: C,
    ready_when_closed: bool,
    // With `ready_when_closed`: what wakes `poll_ready` when the breaker admits again (the
    // end of its open time, or any change); made at the first `Pending`, dropped when ready,
    // never cloned.
    waiting: Option<Box<Waiting>>,
}

/// A `poll_ready` waiting for the breaker to admit: its registration for the breaker's
/// changes (armed before the state is read, so none is missed; deregistered when dropped)
/// and the timer of the open time's end.
struct Waiting {
    changes: breaker_runtime::__internals::Changes,
    reopens: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S: Clone, T: Clone, C: Clone> Clone for CircuitBreaker<S, T, C> {
    fn clone(&self) -> Self {
        CircuitBreaker {
            inner: self.inner.clone(),
            pick: self.pick.clone(),
            classify: self.classify.clone(),
            ready_when_closed: self.ready_when_closed,
            waiting: None,
        }
    }
}

impl<S, T, C> CircuitBreaker<S, T, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug, T: fmt::Debug, C> fmt::Debug for CircuitBreaker<S, T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("inner", &self.inner)
            .field("pick", &self.pick)
            .finish_non_exhaustive()
    }
}

impl<S, Req, T, C> Service<Req> for CircuitBreaker<S, T, C>
where
    S: Service<Req> + Clone,
    T: PickBreaker<Req>,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = CallError<S::Error>;
    type Future = ResponseFuture<S, Req, C>;

    /// The inner service's readiness, as it is: an open breaker never makes this fail.
    /// With [`ready_when_closed`](CircuitBreakerLayer::ready_when_closed), `Pending` first
    /// while the breaker refuses.
    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.ready_when_closed {
            ready!(self.poll_admits(cx));
        }
        self.inner.poll_ready(cx).map_err(CallError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let breaker = self.pick.pick(&req);
        // The readied service goes into the future; this one keeps a fresh clone.
        let fresh = self.inner.clone();
        let readied = std::mem::replace(&mut self.inner, fresh);
        let body = Body {
            call: Readied::new(readied, req),
            classify: self.classify.clone(),
        };
        ResponseFuture {
            call: breaker.call_owned_classified(carried as Carried<S::Response, S::Error>, body),
        }
    }
}

impl<S, T, C> CircuitBreaker<S, T, C> {
    /// `Ready` once the layer's one breaker admits calls; otherwise `Pending`, woken by the
    /// breaker's next change (a transition, a probe slot given back, a reconfiguration, the
    /// fleet's gate) or when its open time ends, whichever comes first.
    #[inline(never)]
    fn poll_admits<Req>(&mut self, cx: &mut Context<'_>) -> Poll<()>
    where
        T: PickBreaker<Req>,
    {
        let Some(breaker) = self.pick.only() else {
            return Poll::Ready(());
        };
        loop {
            let waiting = self.waiting.get_or_insert_with(|| {
                Box::new(Waiting {
                    changes: breaker.changes(),
                    reopens: None,
                })
            });
            // Refusing, and for how long: a known time (open, or half-open with every probe
            // slot leased), or until a change (forced open; or held open by its fleet, whose
            // open time has run out while it waits for another instance's probe). A dry run
            // refuses no call.
            let refuses = match breaker.state() {
                _ if breaker.is_dry_run() => None,
                crate::State::Closed | crate::State::Disabled => None,
                crate::State::ForcedOpen => Some(None),
                crate::State::Open => Some(breaker.retry_in().filter(|d| !d.is_zero())),
                crate::State::HalfOpen => breaker.retry_in().filter(|d| !d.is_zero()).map(Some),
            };
            let Some(until) = refuses else {
                self.waiting = None; // deregistered while ready
                return Poll::Ready(());
            };
            if let Some(left) = until {
                let due = tokio::time::Instant::now() + left;
                let timer = match waiting.reopens.as_mut() {
                    Some(timer) => {
                        timer.as_mut().reset(due);
                        timer
                    }
                    None => waiting
                        .reopens
                        .insert(Box::pin(tokio::time::sleep_until(due))),
                };
                if timer.as_mut().poll(cx).is_ready() {
                    continue; // due: look again (it may have been opened anew meanwhile)
                }
            }
            if waiting.changes.poll_changed(cx).is_ready() {
                continue; // changed (and armed again): look again
            }
            return Poll::Pending;
        }
    }
}

/// Picks the breaker of one request: [`Breaker`] (always itself) or [`Keyed`] (by key).
pub trait PickBreaker<Req> {
    /// The breaker `req` goes through.
    fn pick(&self, req: &Req) -> Breaker;

    /// The one breaker every request goes through, when there is one (for
    /// [`ready_when_closed`](CircuitBreakerLayer::ready_when_closed)); `None` when it depends
    /// on the request.
    fn only(&self) -> Option<&Breaker> {
        None
    }
}

impl<Req> PickBreaker<Req> for Breaker {
    #[inline]
    fn pick(&self, _: &Req) -> Breaker {
        self.clone()
    }

    #[inline]
    fn only(&self) -> Option<&Breaker> {
        Some(self)
    }
}

/// One breaker per key of a [`KeyedBreaker`], the key computed from each request (made by
/// [`CircuitBreakerLayer::keyed`]).
#[derive(Clone)]
pub struct Keyed<K, F> {
    keyed: KeyedBreaker<K>,
    key: F,
}

impl<K, F> Keyed<K, F> {
    /// Each request's breaker is `keyed`'s for `key(&request)`.
    pub(crate) fn new(keyed: KeyedBreaker<K>, key: F) -> Self {
        Keyed { keyed, key }
    }
}

impl<K, F, Req, Q> PickBreaker<Req> for Keyed<K, F>
where
    K: BreakerKey + Borrow<Q>,
    F: Fn(&Req) -> Q,
    Q: Hash + Eq + ToOwned<Owned = K>,
{
    #[inline]
    fn pick(&self, req: &Req) -> Breaker {
        self.keyed.breaker(&(self.key)(req))
    }
}

impl<K, F> fmt::Debug for Keyed<K, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("keyed", &self.keyed)
            .finish_non_exhaustive()
    }
}

/// Judges a finished call of the inner service: what the breaker counts.
pub trait Classify<Res, Err> {
    /// The verdict on one call.
    fn classify(&self, result: &Result<Res, Err>) -> Verdict;
}

impl<F, Res, Err> Classify<Res, Err> for F
where
    F: Fn(&Result<Res, Err>) -> Verdict,
{
    #[inline]
    fn classify(&self, result: &Result<Res, Err>) -> Verdict {
        self(result)
    }
}

/// The layer's judge when none is given: asks the response type ([`DefaultVerdict`]).
/// An `http::Response` is judged by the [`http` preset](crate::http::classify); the
/// standard library's types by `Ok` = success, `Err` = failure.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultClassify;

impl<Res: DefaultVerdict, Err> Classify<Res, Err> for DefaultClassify {
    #[inline]
    fn classify(&self, result: &Result<Res, Err>) -> Verdict {
        Res::default_verdict(result)
    }
}

/// How a response type is judged when the layer has no `.classify(…)`.
///
/// Implemented for `http::Response<B>` (the [`http` preset](crate::http)) and for the
/// standard library's plain types (`()`, integers, `String`, `Vec<T>`, `Box<T>`, `Option<T>`,
/// …: `Ok` is a success, `Err` a failure). For a type of your own, either write
/// `impl DefaultVerdict for MyReply {}` (the provided method judges `Ok`/`Err`), or judge it
/// explicitly with `.classify(…)` (for example [`errors_only`]). When this is missing, the
/// compiler's complaint is often only that the layered service "doesn't satisfy `Service<_>`":
/// this trait is the reason.
#[diagnostic::on_unimplemented(
    message = "the circuit breaker layer does not know how to judge a `{Self}`",
    label = "no default verdict for this response type",
    note = "call `.classify(breaker::tower::errors_only)` on the layer (every `Ok` is a success), \
            or `.classify(|r: &Result<{Self}, _>| …)`, or `impl breaker::tower::DefaultVerdict for {Self} {{}}`"
)]
pub trait DefaultVerdict: Sized {
    /// The verdict on one call; by default every `Ok` is a success, every `Err` a failure.
    fn default_verdict<E>(result: &Result<Self, E>) -> Verdict {
        errors_only(result)
    }
}

/// An answer whose `content-type` is `application/grpc…` by the gRPC table (read from its
/// headers: the response future ends there), any other by the HTTP preset.
impl<B> DefaultVerdict for http::Response<B> {
    #[inline]
    fn default_verdict<E>(result: &Result<Self, E>) -> Verdict {
        match result {
            Ok(response) if crate::grpc_table::is_grpc(response.headers()) => {
                crate::grpc_table::at_headers(response.status(), response.headers())
            }
            _ => crate::http::classify(result),
        }
    }
}

macro_rules! ok_is_success {
    ($($t:ty),* $(,)?) => { $(impl DefaultVerdict for $t {})* };
}
ok_is_success!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    String,
    &'static str,
    std::time::Duration,
);
impl<T> DefaultVerdict for Vec<T> {}
impl<T: ?Sized> DefaultVerdict for Box<T> {}
impl<T: ?Sized> DefaultVerdict for std::sync::Arc<T> {}
impl<T> DefaultVerdict for Option<T> {}

/// A judge for any service: every `Ok` is a success, every `Err` a failure.
/// `.classify(breaker::tower::errors_only)`.
#[inline]
pub fn errors_only<Res, Err>(result: &Result<Res, Err>) -> Verdict {
    match result {
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::Failure,
    }
}

/// The inner call's result with the verdict the body already gave it.
type Judged<Res, Err> = Result<(Res, Verdict), (Err, Verdict)>;

/// The type of [`carried`].
type Carried<Res, Err> = fn(&Judged<Res, Err>) -> Verdict;

/// The classifier handed to the breaker: the verdict was reached inside the body (with the
/// layer's `C`), so this is a plain `fn` and the response future has a name.
fn carried<Res, Err>(judged: &Judged<Res, Err>) -> Verdict {
    match judged {
        Ok((_, verdict)) | Err((_, verdict)) => *verdict,
    }
}

pin_project_lite::pin_project! {
    /// The readied inner service and its request, called at the first poll (so only once the
    /// breaker admitted the call), then the inner service's future.
    pub(crate) struct Readied<S, Req>
    where
        S: Service<Req>,
    {
        start: Option<(S, Req)>,
        #[pin]
        running: Option<S::Future>,
    }
}

impl<S: Service<Req>, Req> Readied<S, Req> {
    pub(crate) fn new(readied: S, req: Req) -> Self {
        Readied {
            start: Some((readied, req)),
            running: None,
        }
    }
}

impl<S: Service<Req>, Req> Future for Readied<S, Req> {
    type Output = Result<S::Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some((mut inner, req)) = this.start.take() {
            this.running.set(Some(inner.call(req)));
        }
        let running = this
            .running
            .as_mut()
            .as_pin_mut()
            .expect("the circuit breaker's call polled after it finished");
        let result = ready!(running.poll(cx));
        this.running.set(None);
        Poll::Ready(result)
    }
}

pin_project_lite::pin_project! {
    /// The call the breaker admits: the readied inner service's call, then its verdict.
    struct Body<S, Req, C>
    where
        S: Service<Req>,
    {
        #[pin]
        call: Readied<S, Req>,
        classify: C,
    }
}

impl<S, Req, C> Future for Body<S, Req, C>
where
    S: Service<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Output = Judged<S::Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.call.poll(cx));
        let verdict = this.classify.classify(&result);
        Poll::Ready(match result {
            Ok(response) => Ok((response, verdict)),
            Err(error) => Err((error, verdict)),
        })
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`CircuitBreaker`]: `'static` and `Send` when the inner service,
    /// its future and the request are. Dropping it before it finishes counts for nothing and
    /// gives back its slots.
    pub struct ResponseFuture<S, Req, C>
    where
        S: Service<Req>,
    {
        #[pin]
        call: CallFuture<'static, Body<S, Req, C>, Judge<Carried<S::Response, S::Error>>, Breaker>,
    }
}

impl<S, Req, C> Future for ResponseFuture<S, Req, C>
where
    S: Service<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Output = Result<S::Response, CallError<S::Error>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.project().call.poll(cx)) {
            Ok((response, _)) => Ok(response),
            Err(CallError::Inner((error, _))) => Err(CallError::Inner(error)),
            Err(CallError::Breaker(refused)) => Err(CallError::Breaker(refused)),
        })
    }
}

impl<S: Service<Req>, Req, C> fmt::Debug for ResponseFuture<S, Req, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
