//! [`HedgeLayer::grpc`]: hedged unary calls for a gRPC client (a tonic `Channel`), judged by
//! the gRPC table; a stream is never hedged.

use std::{
    cell::RefCell,
    fmt,
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll},
};

use http_body::Body;
use tokio::sync::oneshot;
use tonic::body::Body as GrpcRequestBody;
use tower_layer::Layer;
use tower_service::Service;

use crate::grpc::{attempt, carried, BoxError, Carried, GrpcBody, GrpcResponseFuture, Handoff};
use crate::retry::grpc::{ready, Attempts};
use crate::{hedge::HedgeLayer, Breaker, Verdict};

impl HedgeLayer {
    /// A hedging layer for gRPC clients (a tonic `Channel`, or any service of
    /// `http::Request<tonic::body::Body>`), in place of
    /// [`CircuitBreakerLayer::grpc`](crate::tower::CircuitBreakerLayer::grpc): every attempt
    /// goes through `breaker`, judged by the [gRPC table](crate::grpc) as that layer judges
    /// it, and a unary call slower than the delay is hedged per the breaker's
    /// [`Config::hedge`](crate::Config::hedge) (the [hedging rules](crate::hedge): budgeted,
    /// never while the breaker refuses).
    ///
    /// **Unary, not streams.** The bytes on the wire do not say whether a method is unary
    /// (tonic sends a unary and a server-streaming request alike), so the layer tells them
    /// apart by what it sees, as gRPC A6 does:
    /// - the race ends at the first response headers: an answer whose headers carry no code
    ///   is *committed* (gRPC A6): it goes to the caller, its trailers judge it, and no hedge
    ///   is sent after it. A server stream that has begun is never hedged, however long it
    ///   runs; one whose headers come later than the delay is hedged as a unary call would
    ///   be, so put such methods behind `CircuitBreakerLayer::grpc` instead;
    /// - a hedge sends the first attempt's request body again, kept as
    ///   [`RetryLayer::grpc`](crate::retry::RetryLayer::grpc) keeps it (up to
    ///   [`GRPC_RETRY_BUFFER`](crate::retry::GRPC_RETRY_BUFFER)): a client or bidirectional
    ///   stream, still sending when the hedge is due, or a longer body, is never hedged.
    ///
    /// An answer whose headers carry its code (a *Trailers-Only* answer: how a server
    /// answers an error before any message) is judged at once: a failure sends the next
    /// hedge at once, a pushback (`grpc-retry-pushback-ms`) stops the hedges. The attempts
    /// that lose are dropped (their HTTP/2 streams reset) when the committed answer ends (for
    /// a unary call, at once). The winner is timed to its trailers (as with `RetryLayer::grpc`,
    /// `slow_call` covers the whole answer). A refusal reaches the caller as a
    /// [`tonic::Status`], as with the gRPC layer.
    ///
    /// ```no_run
    /// use breaker::{hedge::HedgeLayer, Breaker, Config, HedgeDelay};
    /// use tower::ServiceBuilder;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
    ///     .connect()
    ///     .await?;
    /// let config = Config::default().hedge(1).hedge_delay(HedgeDelay::Percentile(95.0));
    /// let inventory = Breaker::new("shop::inventory", config);
    /// let channel = ServiceBuilder::new()
    ///     .layer(HedgeLayer::grpc(inventory))
    ///     .service(channel);
    /// // Hand `channel` to a generated client: `InventoryClient::new(channel)`.
    /// # let _ = channel;
    /// # Ok(()) }
    /// ```
    pub fn grpc(breaker: Breaker) -> GrpcHedgeLayer {
        GrpcHedgeLayer { breaker }
    }
}

/// The layer [`HedgeLayer::grpc`] makes.
#[derive(Clone)]
pub struct GrpcHedgeLayer {
    breaker: Breaker,
}

impl fmt::Debug for GrpcHedgeLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcHedgeLayer")
            .field("breaker", &self.breaker)
            .finish()
    }
}

impl<S> Layer<S> for GrpcHedgeLayer {
    type Service = GrpcHedge<S>;

    fn layer(&self, inner: S) -> GrpcHedge<S> {
        GrpcHedge {
            inner,
            breaker: self.breaker.clone(),
        }
    }
}

/// The service [`GrpcHedgeLayer`] makes.
#[derive(Clone)]
pub struct GrpcHedge<S> {
    inner: S,
    breaker: Breaker,
}

impl<S> GrpcHedge<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug> fmt::Debug for GrpcHedge<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcHedge")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker)
            .finish()
    }
}

impl<S, ResBody> Service<http::Request<GrpcRequestBody>> for GrpcHedge<S>
where
    S: Service<http::Request<GrpcRequestBody>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    ResBody: Body + Send + 'static,
{
    type Response = http::Response<GrpcBody<ResBody>>;
    type Error = BoxError;
    type Future = GrpcResponseFuture<ResBody>;

    /// The inner service's readiness: the first attempt is made by the service readied here
    /// (and whatever it reserved goes with it into the call, or is given back when the
    /// breaker refuses).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<GrpcRequestBody>) -> Self::Future {
        // As `HedgeLayer::new`: the readied service makes the first attempt, each hedge
        // readies a clone. A `RefCell`, not a lock: `make` is called from the task polling
        // the race.
        let attempts = RefCell::new(Attempts::new(&mut self.inner, req));
        let kept = attempts.borrow().kept.clone();
        let (out, handed) = oneshot::channel();
        let race = Arc::new(Race {
            out: Mutex::new(Some(out)),
            committed: AtomicBool::new(false),
        });
        let (replayable, open) = (kept, race.clone());
        // A hedge only while no attempt has answered and the request can be sent again.
        let more = move || !open.committed.load(Ordering::Acquire) && replayable.whole();
        let make = move || {
            let (svc, req) = attempts.borrow_mut().next();
            let race = race.clone();
            async move {
                // Not ready: no answer from the dependency, a failure as the transport's.
                let svc = ready(svc, Verdict::Failure).await?;
                let (call, handed) = attempt(svc, req);
                Racer {
                    call: Some(Box::pin(call)),
                    handed: Some(handed),
                    race,
                    mine: false,
                }
                .await
            }
        };
        let judge = breaker_runtime::Classify(carried as Carried<ResBody>);
        let hedged = self.breaker.clone().call_hedged_while(judge, make, more);
        GrpcResponseFuture::new(Box::pin(crate::grpc::Retried { future: hedged }), handed)
    }
}

/// What the attempts of one hedged call share.
struct Race<B> {
    /// Where the committed answer goes: the caller's response future.
    out: Mutex<Option<oneshot::Sender<Handoff<B>>>>,
    /// An attempt's answer was committed: the others stop, no hedge follows.
    committed: AtomicBool,
}

/// One attempt's call: passes its response on to the caller when it commits to it, and
/// drops its call (resetting its stream) once another attempt has committed.
struct Racer<F, B> {
    call: Option<Pin<Box<F>>>,
    handed: Option<oneshot::Receiver<Handoff<B>>>,
    race: Arc<Race<B>>,
    /// This attempt's answer is the committed one.
    mine: bool,
}

impl<F: Future, B> Future for Racer<F, B> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        if !this.mine && this.race.committed.load(Ordering::Acquire) {
            // Lost: the race ends with the committed answer's trailers, which drop this
            // (a cancelled call); its stream goes now.
            this.call = None;
            return Poll::Pending;
        }
        let Some(call) = this.call.as_mut() else {
            return Poll::Pending;
        };
        let polled = call.as_mut().poll(cx);
        if let Some(handed) = this.handed.as_mut()
            && let Ok(handoff) = handed.try_recv()
        {
            this.handed = None;
            this.mine = true;
            this.race.committed.store(true, Ordering::Release);
            let out = this
                .race
                .out
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(out) = out {
                let _ = out.send(handoff);
            }
        }
        polled
    }
}
