//! [`RetryLayer::grpc`]: budgeted retries for a gRPC client (a tonic `Channel`), judged by the
//! gRPC table.

use std::{
    collections::VecDeque,
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;
use tonic::body::Body as GrpcRequestBody;
use tower_layer::Layer;
use tower_service::Service;

use crate::grpc::{
    attempt, carried, Answer, BoxError, Carried, GrpcBody, GrpcResponseFuture, Handoff,
};
use crate::{retry::RetryLayer, Breaker, CallError, Verdict};

/// The most of a request body kept to send again: a request whose body is longer (or has
/// not ended when its answer arrives, a client stream) is sent once, not retried.
pub const GRPC_RETRY_BUFFER: usize = 64 * 1024;

/// The bytes of a gRPC request body.
type Chunk = <GrpcRequestBody as Body>::Data;

impl RetryLayer {
    /// A retry layer for gRPC clients (a tonic `Channel`, or any service of
    /// `http::Request<tonic::body::Body>`), in place of
    /// [`CircuitBreakerLayer::grpc`](crate::tower::CircuitBreakerLayer::grpc): every attempt
    /// goes through `breaker`, judged by the [gRPC table](crate::grpc) as that layer judges
    /// it, and the answers the table calls a failure are retried per the breaker's
    /// [`Config::retry`](crate::Config::retry) (the [retry rules](crate::retry): budgeted,
    /// counted when made, bounded by [`Config::retry_within`](crate::Config::retry_within)).
    ///
    /// - A failure whose code comes in the response headers (a *Trailers-Only* answer, what
    ///   a server's error before any message is, or an HTTP error) is retried; a
    ///   `grpc-retry-pushback-ms: N` waits at least N ms first, and a negative or malformed
    ///   pushback means "do not retry" (gRPC A6): the answer is returned.
    /// - An answer whose headers carry no code is committed (gRPC A6): its messages go to the
    ///   caller and its trailers judge it; it is never retried. Its attempt is timed to the
    ///   trailers (`slow_call` and the abandoned rule cover the whole stream, unlike
    ///   [`CircuitBreakerLayer::grpc`](crate::tower::CircuitBreakerLayer::grpc), which stops
    ///   timing at the headers): put server-streaming methods behind that layer instead.
    /// - The request body is kept (up to [`GRPC_RETRY_BUFFER`]) to be sent again; a longer
    ///   one, or a client stream still open when the answer comes, is not retried.
    /// - A refusal reaches the caller as a [`tonic::Status`], as with the gRPC layer.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use breaker::{retry::RetryLayer, Breaker, Config};
    /// use tower::ServiceBuilder;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
    ///     .connect()
    ///     .await?;
    /// let inventory = Breaker::new("shop::inventory", Config::default().retry(3));
    /// let channel = ServiceBuilder::new()
    ///     .layer(RetryLayer::grpc(inventory))
    ///     .service(channel);
    /// // Hand `channel` to a generated client: `InventoryClient::new(channel)`.
    /// # let _ = channel;
    /// # Ok(()) }
    /// ```
    pub fn grpc(breaker: Breaker) -> GrpcRetryLayer {
        GrpcRetryLayer { breaker }
    }
}

/// The layer [`RetryLayer::grpc`] makes.
#[derive(Clone)]
pub struct GrpcRetryLayer {
    breaker: Breaker,
}

impl fmt::Debug for GrpcRetryLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetryLayer")
            .field("breaker", &self.breaker)
            .finish()
    }
}

impl<S> Layer<S> for GrpcRetryLayer {
    type Service = GrpcRetry<S>;

    fn layer(&self, inner: S) -> GrpcRetry<S> {
        GrpcRetry {
            inner,
            breaker: self.breaker.clone(),
        }
    }
}

/// The service [`GrpcRetryLayer`] makes.
#[derive(Clone)]
pub struct GrpcRetry<S> {
    inner: S,
    breaker: Breaker,
}

impl<S: fmt::Debug> fmt::Debug for GrpcRetry<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetry")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker)
            .finish()
    }
}

impl<S, ResBody> Service<http::Request<GrpcRequestBody>> for GrpcRetry<S>
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

    /// The inner service's readiness: the first attempt is made by the service readied here.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<GrpcRequestBody>) -> Self::Future {
        // As `RetryLayer`: the readied service makes the first attempt, each retry readies a
        // clone before the breaker admits it.
        let mut attempts = Attempts::new(&mut self.inner, req);
        let (out, handed) = oneshot::channel();
        let out = Arc::new(Mutex::new(Some(out)));
        let replayable = attempts.kept.clone();
        let prepare = move || {
            let (svc, req) = attempts.next();
            let out = out.clone();
            async move {
                let svc = ready(svc, Verdict::Neutral).await?;
                let (call, handed) = attempt(svc, req);
                Ok(Forward {
                    call: Box::pin(call),
                    handed: Some(handed),
                    out,
                })
            }
        };
        let is_final = move |r: &Result<_, CallError<_>>| match r {
            Ok((Answer::HandedOff, _)) => true,
            Ok((Answer::Whole(response), _)) => declines(response.headers()) || !replayable.whole(),
            Err(_) => !replayable.whole(),
        };
        let judge = breaker_runtime::Classify(carried as Carried<ResBody>);
        let retried = self
            .breaker
            .clone()
            .call_retried_prepared(judge, prepare, is_final);
        GrpcResponseFuture::new(Box::pin(crate::grpc::Retried { future: retried }), handed)
    }
}

/// A negative or malformed `grpc-retry-pushback-ms`: the server says not to retry (gRPC A6).
pub(crate) fn declines(headers: &HeaderMap) -> bool {
    headers.get("grpc-retry-pushback-ms").is_some_and(|value| {
        let text = value.to_str().map(str::trim).unwrap_or("");
        text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Where each attempt of one gRPC call (a retry's, a hedge's) gets its service and its
/// request: the first, the service `poll_ready` readied and the request as sent, its body
/// kept as it goes; each later one, a clone of the service (to be readied: [`ready`]) and
/// the kept request again.
pub(crate) struct Attempts<S> {
    readied: Option<S>,
    spare: S,
    first: Option<http::Request<GrpcRequestBody>>,
    template: http::Request<()>,
    /// The first request's body, as far as it was sent.
    pub(crate) kept: Arc<Kept>,
}

impl<S: Clone> Attempts<S> {
    /// The attempts of `req`, the first made by `inner` (readied), which a clone replaces.
    pub(crate) fn new(inner: &mut S, req: http::Request<GrpcRequestBody>) -> Self {
        let spare = inner.clone();
        let readied = Some(std::mem::replace(inner, spare.clone()));
        let kept = Arc::new(Kept::default());
        let template = head(&req);
        let first = Some(req.map(|body| {
            GrpcRequestBody::new(Keep {
                inner: body,
                kept: kept.clone(),
            })
        }));
        Attempts {
            readied,
            spare,
            first,
            template,
            kept,
        }
    }

    /// The next attempt's service (`Err`: a clone still to be readied) and request.
    pub(crate) fn next(&mut self) -> (Result<S, S>, http::Request<GrpcRequestBody>) {
        let svc = self.readied.take().ok_or_else(|| self.spare.clone());
        let req = self
            .first
            .take()
            .unwrap_or_else(|| again(&self.template, &self.kept));
        (svc, req)
    }
}

/// An attempt's service, ready: the readied one as it is, a clone once its `poll_ready` says
/// so (its error judged `verdict`: no answer came from the dependency).
pub(crate) async fn ready<S>(svc: Result<S, S>, verdict: Verdict) -> Result<S, (BoxError, Verdict)>
where
    S: Service<http::Request<GrpcRequestBody>>,
    S::Error: Into<BoxError>,
{
    match svc {
        Ok(readied) => Ok(readied),
        Err(mut fresh) => {
            std::future::poll_fn(|cx| fresh.poll_ready(cx))
                .await
                .map_err(|e| (e.into(), verdict))?;
            Ok(fresh)
        }
    }
}

/// A request's method, URI, version, headers and extensions, without its body.
pub(crate) fn head<B>(req: &http::Request<B>) -> http::Request<()> {
    let mut copy = http::Request::new(());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    copy
}

/// The request again, with the body kept from the first attempt (empty if it was not kept
/// whole: `is_final` then stopped the retries before this is made).
pub(crate) fn again(template: &http::Request<()>, kept: &Kept) -> http::Request<GrpcRequestBody> {
    head(template).map(|()| GrpcRequestBody::new(kept.replay()))
}

/// What the first attempt's request body sent, kept to be sent again (by a retry, or by
/// `HedgeLayer::grpc`'s hedges).
#[derive(Default)]
pub(crate) struct Kept {
    frames: Mutex<KeptFrames>,
}

#[derive(Default)]
struct KeptFrames {
    data: Vec<Chunk>,
    trailers: Option<HeaderMap>,
    size: usize,
    ended: bool,
    /// Too long, or failed: not kept.
    lost: bool,
}

impl Kept {
    /// The whole body was kept.
    pub(crate) fn whole(&self) -> bool {
        let frames = self.frames.lock().unwrap_or_else(|e| e.into_inner());
        frames.ended && !frames.lost
    }

    fn replay(&self) -> Replay {
        let frames = self.frames.lock().unwrap_or_else(|e| e.into_inner());
        Replay {
            data: frames.data.iter().cloned().collect(),
            trailers: frames.trailers.clone(),
        }
    }
}

pin_project_lite::pin_project! {
    /// The first attempt's request body, keeping what it sends.
    pub(crate) struct Keep<B> {
        #[pin]
        pub(crate) inner: B,
        pub(crate) kept: Arc<Kept>,
    }
}

impl<B: Body<Data = Chunk>> Body for Keep<B> {
    type Data = Chunk;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Chunk>, B::Error>>> {
        let mut this = self.project();
        let frame = std::task::ready!(this.inner.as_mut().poll_frame(cx));
        let end = this.inner.is_end_stream();
        let mut kept = this.kept.frames.lock().unwrap_or_else(|e| e.into_inner());
        match &frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    kept.size = kept.size.saturating_add(data.len());
                    if kept.size > GRPC_RETRY_BUFFER {
                        kept.lost = true;
                        kept.data = Vec::new();
                    } else if !kept.lost {
                        kept.data.push(data.clone());
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    kept.trailers = Some(trailers.clone());
                }
                kept.ended |= end;
            }
            Some(Err(_)) => kept.lost = true,
            None => kept.ended = true,
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A kept request body, sent again.
struct Replay {
    data: VecDeque<Chunk>,
    trailers: Option<HeaderMap>,
}

impl Body for Replay {
    type Data = Chunk;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Chunk>, tonic::Status>>> {
        let this = &mut *self;
        if let Some(data) = this.data.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty() && self.trailers.is_none()
    }
}

/// One attempt's call, which passes its response on to the caller's response future when
/// it hands it out (a committed answer, judged at its trailers).
struct Forward<F, B> {
    call: Pin<Box<F>>,
    handed: Option<oneshot::Receiver<Handoff<B>>>,
    out: Arc<Mutex<Option<oneshot::Sender<Handoff<B>>>>>,
}

impl<F: Future, B> Future for Forward<F, B> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let polled = this.call.as_mut().poll(cx);
        if let Some(handed) = this.handed.as_mut()
            && let Ok(handoff) = handed.try_recv()
        {
            this.handed = None;
            let out = this.out.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(out) = out {
                let _ = out.send(handoff);
            }
        }
        polled
    }
}
