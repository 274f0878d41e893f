//! [`HedgeLayer`]: a breaker in front of a tower service, with hedged requests.

use std::{cell::Cell, fmt, future::Future, pin::Pin, task::Context, task::Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::retry::{ByClone, CloneRequest};
use crate::tower::{Classify, DefaultClassify};
use crate::{Breaker, CallError};

/// A [`Layer`] that puts a breaker in front of a service and hedges slow requests through
/// it, per the breaker's [`Config::hedge`](crate::Config::hedge) (see the
/// [module docs](crate::hedge)): what
/// [`CircuitBreakerLayer`](crate::tower::CircuitBreakerLayer) does, once per attempt, the
/// attempts raced and the first good answer returned. Use it *instead of* that layer, not
/// around it.
///
/// Each attempt sends a copy of the request (by `Clone`, or by
/// [`clone_request`](Self::clone_request): an `http::Request` is not `Clone`, so pass
/// [`clone_http_request`](crate::retry::clone_http_request)). The first attempt is made by
/// the service readied in `poll_ready` (with whatever it reserved), and only once the
/// breaker admits it; each hedge, sent only once the breaker and the hedge budget admit it,
/// readies a fresh clone of the inner service before calling it. The attempts that lose are
/// dropped, and with them their inner futures.
///
/// Judged by [`DefaultClassify`] (an `http::Response` by the [`http` preset](crate::http):
/// a 503 is a failure, which sends the next hedge at once, and an answer with `Retry-After`
/// is pushback, which stops further hedges), or by [`classify`](Self::classify). The
/// response future is boxed (one allocation per request).
///
/// ```
/// use std::time::Duration;
/// use breaker::{hedge::HedgeLayer, Breaker, Config, HedgeDelay};
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let config = Config::default()
///     .hedge(1)
///     .hedge_delay(HedgeDelay::Fixed(Duration::from_millis(20)));
/// let breaker = Breaker::new("docs::hedge_layer", config);
/// let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
/// let counted = calls.clone();
/// let svc = ServiceBuilder::new()
///     .layer(HedgeLayer::new(breaker.clone()))
///     .service(service_fn(move |n: u32| {
///         let call = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
///         async move {
///             // The first replica is stuck for 500 ms; the hedge answers in 5 ms.
///             let took = if call == 0 { 500 } else { 5 };
///             tokio::time::sleep(Duration::from_millis(took)).await;
///             Ok::<_, std::io::Error>(n)
///         }
///     }));
/// let started = tokio::time::Instant::now();
/// assert_eq!(svc.oneshot(7).await.unwrap(), 7);
/// assert_eq!(started.elapsed(), Duration::from_millis(25));
/// let stats = breaker.stats();
/// assert_eq!((stats.hedges, stats.hedges_won), (1, 1));
/// # }
/// ```
#[derive(Clone)]
pub struct HedgeLayer<C = DefaultClassify, K = ByClone> {
    breaker: Breaker,
    classify: C,
    copy: K,
}

impl HedgeLayer {
    /// Every request goes through `breaker`, hedged per its `Config::hedge`.
    pub fn new(breaker: Breaker) -> Self {
        HedgeLayer {
            breaker,
            classify: DefaultClassify,
            copy: ByClone,
        }
    }
}

impl<C, K> HedgeLayer<C, K> {
    /// Judges every attempt with `classify` (as
    /// [`CircuitBreakerLayer::classify`](crate::tower::CircuitBreakerLayer::classify)): a
    /// `Success` or `Neutral` attempt wins, a `Failure` sends the next hedge at once, an
    /// `OpenFor` sends no more hedges.
    pub fn classify<C2>(self, classify: C2) -> HedgeLayer<C2, K> {
        HedgeLayer {
            breaker: self.breaker,
            classify,
            copy: self.copy,
        }
    }

    /// Copies each attempt's request with `copy` (`Fn(&Req) -> Req`) instead of `Clone`:
    /// [`clone_http_request`](crate::retry::clone_http_request) for an `http::Request` with
    /// a `Clone` body.
    pub fn clone_request<K2>(self, copy: K2) -> HedgeLayer<C, K2> {
        HedgeLayer {
            breaker: self.breaker,
            classify: self.classify,
            copy,
        }
    }
}

impl<S, C: Clone, K: Clone> Layer<S> for HedgeLayer<C, K> {
    type Service = Hedge<S, C, K>;

    fn layer(&self, inner: S) -> Self::Service {
        Hedge {
            inner,
            breaker: self.breaker.clone(),
            classify: self.classify.clone(),
            copy: self.copy.clone(),
        }
    }
}

impl<C, K> fmt::Debug for HedgeLayer<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

/// The service [`HedgeLayer`] makes.
#[derive(Clone)]
pub struct Hedge<S, C = DefaultClassify, K = ByClone> {
    inner: S,
    breaker: Breaker,
    classify: C,
    copy: K,
}

impl<S, C, K> Hedge<S, C, K> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug, C, K> fmt::Debug for Hedge<S, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedge")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

/// The response future of [`Hedge`].
pub type HedgeFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, CallError<E>>> + Send>>;

impl<S, Req, C, K> Service<Req> for Hedge<S, C, K>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send,
    Req: Send + 'static,
    C: Classify<S::Response, S::Error> + Clone + Send + Sync + 'static,
    K: CloneRequest<Req> + Clone + Send + 'static,
{
    type Response = S::Response;
    type Error = CallError<S::Error>;
    type Future = HedgeFuture<S::Response, S::Error>;

    /// The inner service's readiness: the first attempt is made by the service readied
    /// here (and whatever it reserved, a `ConcurrencyLimit` permit or a `Buffer` slot, goes
    /// with it into the call, or is given back when the breaker refuses).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(CallError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let breaker = self.breaker.clone();
        // tower's pattern: the readied service makes the first attempt; this one keeps a
        // clone (not readied), and each hedge readies a clone of that.
        let spare = self.inner.clone();
        // A `Cell`, not a lock: `make` is called from the one task that polls the race.
        let readied = Cell::new(Some(std::mem::replace(&mut self.inner, spare.clone())));
        let classify = self.classify.clone();
        let copy = self.copy.clone();
        let judge = move |r: &Result<S::Response, S::Error>| classify.classify(r);
        let make = move || {
            let svc = readied.take().ok_or_else(|| spare.clone());
            let req = copy.clone_request(&req);
            async move {
                let mut svc = match svc {
                    Ok(readied) => readied,
                    Err(mut fresh) => {
                        std::future::poll_fn(|cx| fresh.poll_ready(cx)).await?;
                        fresh
                    }
                };
                svc.call(req).await
            }
        };
        Box::pin(async move { breaker.call_hedged_classified(judge, make).await })
    }
}
