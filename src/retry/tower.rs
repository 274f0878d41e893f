//! [`RetryLayer`]: a breaker in front of a tower service, with budgeted retries.

use std::{fmt, future::Future, pin::Pin, task::Context, task::Poll};

use tower_layer::Layer;
use tower_service::Service;

use breaker_runtime::Classify as Judge;

use crate::tower::{Classify, DefaultClassify};
use crate::{Breaker, CallError};

/// A [tower layer](https://docs.rs/tower-layer/0.3/tower_layer/trait.Layer.html) that puts a breaker in front of a service and retries failed requests
/// through it, per the breaker's [`Config::retry`](crate::Config::retry) (see the
/// [module docs](crate::retry)): what [`CircuitBreakerLayer`](crate::tower::CircuitBreakerLayer)
/// does, once per attempt. Use it *instead of* that layer, not around it.
///
/// It keeps tower's contract: the first attempt is made by the inner service that
/// `poll_ready` readied (so a `ConcurrencyLimit` permit or a `Buffer` slot it reserved is
/// used, never held), and each retry by a clone readied *before* the breaker admits it, so
/// waiting for the inner service's readiness is not the dependency's time (no `timeout`,
/// `slow_call`, bulkhead seat or probe slot is held meanwhile). A retry whose clone is not
/// ready within [`Config::retry_within`](crate::Config::retry_within) is not made: the last
/// answer is returned. A retry's readiness error ends the call with that error, uncounted. Each attempt sends a copy of the request (by
/// `Clone`, or by [`clone_request`](Self::clone_request): an `http::Request` is not `Clone`,
/// so pass [`clone_http_request`]), and never while the breaker refuses. The retries follow
/// the [module docs](crate::retry): counted when made, bounded by
/// [`Config::retry_within`](crate::Config::retry_within). Judged by
/// [`DefaultClassify`] (an `http::Response` by the [`http` preset](crate::http), so a 429's
/// or a 503's `Retry-After` is the wait before the retry), or by
/// [`classify`](Self::classify). The response future is boxed (one allocation per request).
///
/// ```
/// use std::time::Duration;
/// use breaker::{retry::RetryLayer, Breaker, Config};
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let breaker = Breaker::new("docs::retry_layer", Config::default().retry(3));
/// let tries = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
/// let counted = tries.clone();
/// let svc = ServiceBuilder::new()
///     .layer(RetryLayer::new(breaker.clone()))
///     .service(service_fn(move |n: u32| {
///         let attempt = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
///         async move { if attempt < 2 { Err(std::io::Error::other("503")) } else { Ok(n) } }
///     }));
/// assert_eq!(svc.oneshot(7).await.unwrap(), 7);
/// assert_eq!(breaker.stats().retries, 2);
/// # }
/// ```
#[derive(Clone)]
pub struct RetryLayer<C = DefaultClassify, K = ByClone> {
    breaker: Breaker,
    classify: C,
    copy: K,
}

impl RetryLayer {
    /// Every request goes through `breaker`, retried per its `Config::retry`.
    pub fn new(breaker: Breaker) -> Self {
        RetryLayer {
            breaker,
            classify: DefaultClassify,
            copy: ByClone,
        }
    }
}

impl<C, K> RetryLayer<C, K> {
    /// Judges every attempt with `classify` (as
    /// [`CircuitBreakerLayer::classify`](crate::tower::CircuitBreakerLayer::classify)): a
    /// `Failure` is retried, an `OpenFor(d)` after at least `d`, the rest returned.
    pub fn classify<C2>(self, classify: C2) -> RetryLayer<C2, K> {
        RetryLayer {
            breaker: self.breaker,
            classify,
            copy: self.copy,
        }
    }

    /// Copies each attempt's request with `copy` (`Fn(&Req) -> Req`) instead of `Clone`:
    /// [`clone_http_request`] for an `http::Request` with a `Clone` body.
    pub fn clone_request<K2>(self, copy: K2) -> RetryLayer<C, K2> {
        RetryLayer {
            breaker: self.breaker,
            classify: self.classify,
            copy,
        }
    }
}

/// How a [`RetryLayer`] copies a request for each attempt: [`ByClone`], or any
/// `Fn(&Req) -> Req`.
pub trait CloneRequest<Req> {
    /// A copy of `req` to send.
    fn clone_request(&self, req: &Req) -> Req;
}

/// Copies a request by its `Clone` (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct ByClone;

impl<Req: Clone> CloneRequest<Req> for ByClone {
    fn clone_request(&self, req: &Req) -> Req {
        req.clone()
    }
}

impl<Req, F: Fn(&Req) -> Req> CloneRequest<Req> for F {
    fn clone_request(&self, req: &Req) -> Req {
        self(req)
    }
}

/// A copy of an `http::Request` whose body is `Clone` (`http_body_util::Empty`, `Full`,
/// `String`, …): method, URI, version, headers, extensions and body.
pub fn clone_http_request<B: Clone>(req: &http::Request<B>) -> http::Request<B> {
    let mut copy = http::Request::new(req.body().clone());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    copy
}

impl<S, C: Clone, K: Clone> Layer<S> for RetryLayer<C, K> {
    type Service = Retry<S, C, K>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry {
            inner,
            breaker: self.breaker.clone(),
            classify: self.classify.clone(),
            copy: self.copy.clone(),
        }
    }
}

impl<C, K> fmt::Debug for RetryLayer<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

/// The service [`RetryLayer`] makes.
#[derive(Clone)]
pub struct Retry<S, C = DefaultClassify, K = ByClone> {
    inner: S,
    breaker: Breaker,
    classify: C,
    copy: K,
}

impl<S: fmt::Debug, C, K> fmt::Debug for Retry<S, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

/// The response future of [`Retry`].
pub type RetryFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, CallError<E>>> + Send>>;

impl<S, Req, C, K> Service<Req> for Retry<S, C, K>
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
    type Future = RetryFuture<S::Response, S::Error>;

    /// The inner service's readiness: the first attempt is made by the service readied
    /// here (and whatever it reserved, a `ConcurrencyLimit` permit or a `Buffer` slot, goes
    /// with it into the call).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(CallError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let breaker = self.breaker.clone();
        // tower's pattern: the readied service makes the first attempt; this one keeps a
        // clone (not readied), and each retry readies a clone of that before the breaker
        // admits it.
        let spare = self.inner.clone();
        let mut readied = Some(std::mem::replace(&mut self.inner, spare.clone()));
        let classify = self.classify.clone();
        let copy = self.copy.clone();
        let judge = Judge(move |r: &Result<S::Response, S::Error>| classify.classify(r));
        let prepare = move || {
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
                // Called when the breaker first polls it: once it admitted the attempt.
                Ok(async move { svc.call(req).await })
            }
        };
        Box::pin(breaker.call_retried_prepared(judge, prepare, |_: &Result<_, _>| false))
    }
}
