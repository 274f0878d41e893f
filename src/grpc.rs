//! gRPC (feature `grpc`): a tonic answer judged by its `grpc-status`, and refusals a tonic
//! caller understands.
//!
//! A gRPC error travels as an HTTP `200`: its code is in the `grpc-status` header of a
//! *Trailers-Only* answer (an error before any message), or in the trailers after the last
//! message. A breaker that judges the HTTP status counts every gRPC error as a success; one
//! that reads only the headers misses a code in the trailers. [`CircuitBreakerLayer::grpc`]
//! goes over a tonic `Channel` (any
//! `Service<http::Request<_>, Response = http::Response<_>>`), wraps each response body and
//! judges the call when its trailers arrive, as tower-http's `ClassifyEos` does:
//!
//! ```no_run
//! use breaker::{tower::CircuitBreakerLayer, Breaker, Config};
//! use tower::ServiceBuilder;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
//!     .connect()
//!     .await?;
//! let inventory = Breaker::new("shop::inventory", Config::default().threshold(5));
//! let channel = ServiceBuilder::new()
//!     .layer(CircuitBreakerLayer::grpc(inventory))
//!     .service(channel);
//! // Hand `channel` to a generated client: `InventoryClient::new(channel)`.
//! # let _ = channel;
//! # Ok(()) }
//! ```
//!
//! | `grpc-status` | [`Verdict`] | why |
//! | --- | --- | --- |
//! | `OK` | `Success` | |
//! | `UNAVAILABLE`, `DEADLINE_EXCEEDED`, `INTERNAL`, `UNKNOWN`, `DATA_LOSS`, `ABORTED` | `Failure` | the dependency is failing |
//! | `RESOURCE_EXHAUSTED` | `Failure` | overloaded (with a pushback: `OpenFor`, below) |
//! | `CANCELLED`, `INVALID_ARGUMENT`, `NOT_FOUND`, `ALREADY_EXISTS`, `PERMISSION_DENIED`, `UNAUTHENTICATED`, `FAILED_PRECONDITION`, `OUT_OF_RANGE`, `UNIMPLEMENTED` | `Neutral` | the caller's own doing: counts for nothing |
//! | any code but `OK` with `grpc-retry-pushback-ms: N` (N > 0) | `OpenFor(N ms)` | the server said how long to stay away (gRPC A6); a negative or malformed value is ignored |
//! | any code but `OK` with `grpc-retry-pushback-ms: 0` | `Failure` | "now is fine": one failure, and a retry may follow |
//!
//! An answer without `grpc-status` is judged as tonic's client reads it: an HTTP status
//! other than 200 by gRPC's HTTP mapping (`502`, `503`, `504`, `429` → `UNAVAILABLE`, `404` →
//! `UNIMPLEMENTED`, …), a body that ends without trailers as `UNKNOWN` (a truncated
//! stream), a body that fails mid-stream as a failure.
//!
//! **A stream is judged by its status, timed by its headers.** The breaker's `timeout`,
//! `slow_call` and the abandoned rule (a call dropped after `slow_call` is a slow call) apply
//! until the response headers arrive: a unary call's whole answer, a stream's start. After
//! them the messages are the caller's to time: a stream of 400 ms whose headers came in 5 ms
//! is a success under `slow_call = 200ms` (and no `timeout` cuts it), and the status in its
//! trailers judges it, so a failing code after a long stream is a failure (not a slow call).
//! A response body dropped before its end (the caller stopped reading) is a cancelled call,
//! however long it ran: it counts for nothing and gives back its probe and bulkhead slots,
//! which the call holds until its end. Headers later than `slow_call` still make a slow call
//! (abandoned if the body is then dropped), and headers later than `timeout` a timeout. A
//! half-open probe that is a stream keeps its probe slot for its lease (`timeout`, else the
//! cool-off): a stream that ends later is counted, but the next call probes in its place.
//!
//! **The plain layer over a `Channel`**: [`CircuitBreakerLayer::new`] and
//! [`keyed`](CircuitBreakerLayer::keyed) judge an answer whose `content-type` is
//! `application/grpc…` by this table too (with the `tower` feature alone), but from its
//! headers only, since their response future ends there: a Trailers-Only code (how a server
//! answers an error before any message, which is how tonic and grpc-go answer a failed unary
//! call) and the HTTP status by the mapping above; a `200` whose code comes in the trailers
//! counts as a success. Use `CircuitBreakerLayer::grpc` to judge the trailers too, and to
//! give the caller a refusal as a [`Status`].
//!
//! The table is [`verdict`]; wrap it to change a code
//! (`.classify(…)` is for the plain tower layer; here, write a `Service` of your own around
//! [`verdict`] or pick the codes in your judge). [`classify`] applies it to a
//! `Result<T, tonic::Status>`, for the attribute on a function a tonic client calls:
//!
//! ```
//! use breaker::circuit_breaker;
//!
//! #[circuit_breaker(threshold = 5, cool_off = "10s", classify = breaker::grpc::classify)]
//! async fn reserve(sku: u32) -> Result<u32, tonic::Status> {
//!     Err(tonic::Status::not_found("no such sku")) // neutral: the caller asked for nothing
//! }
//! ```
//!
//! **What the caller sees when the breaker refuses**: a `tonic::Status` (inside the boxed
//! error the layer returns, where tonic's `Status::from_error` finds it): `UNAVAILABLE` for
//! open, throttled and full, with `grpc-retry-pushback-ms` = `retry_in` when the breaker
//! knows it; `DEADLINE_EXCEEDED` for the breaker's own `timeout`. Never `UNKNOWN`. Attribute
//! users convert with `tonic::Status::from(refusal)` (`impl From<BreakerError> for Status`).
//!
//! **What the breaker's `timeout` covers**: until the response headers arrive (a unary call's
//! whole answer, a stream's start); the stream's messages are the caller's to time (above).

use std::{
    borrow::Borrow,
    fmt,
    future::Future,
    hash::Hash,
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};

use http::{HeaderMap, StatusCode};
use http_body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;
use tonic::{Code, Status};
use tower_layer::Layer;
use tower_service::Service;

use crate::{
    grpc_table as table,
    tower::{CircuitBreakerLayer, Keyed, PickBreaker, Readied},
    Breaker, BreakerKey, CallError, KeyedBreaker, Verdict,
};

/// The error type of the layered service: tonic's own (`Box<dyn Error + Send + Sync>`), with
/// a refusal inside as a [`Status`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The verdict on a gRPC answer with this `code`, whose headers or trailers are `metadata`
/// (read for `grpc-retry-pushback-ms`): the table in the [module docs](self).
///
/// ```
/// use std::time::Duration;
/// use breaker::{grpc::verdict, Verdict};
/// use http::{HeaderMap, HeaderValue};
/// use tonic::Code;
///
/// let mut trailers = HeaderMap::new();
/// assert_eq!(verdict(Code::Ok, &trailers), Verdict::Success);
/// assert_eq!(verdict(Code::Unavailable, &trailers), Verdict::Failure);
/// assert_eq!(verdict(Code::NotFound, &trailers), Verdict::Neutral);
/// trailers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("1500"));
/// assert_eq!(
///     verdict(Code::ResourceExhausted, &trailers),
///     Verdict::OpenFor(Duration::from_millis(1500)),
/// );
/// ```
pub fn verdict(code: Code, metadata: &HeaderMap) -> Verdict {
    judge(code, || table::pushback_in(metadata))
}

/// The table, with the pushback read only for an answer that is not `OK`.
fn judge(code: Code, pushback: impl FnOnce() -> Option<Duration>) -> Verdict {
    table::judge(i32::from(code), pushback)
}

/// The table over a tonic call's result: `Ok` is a success, `Err(status)` is judged by
/// [`verdict`] with the status's metadata. For `classify = breaker::grpc::classify` on an
/// annotated function that returns `Result<T, tonic::Status>`, or
/// [`Breaker::call_classified`](crate::Breaker::call_classified).
///
/// ```
/// use breaker::{grpc::classify, Verdict};
///
/// assert_eq!(classify(&Ok::<_, tonic::Status>(())), Verdict::Success);
/// assert_eq!(classify::<()>(&Err(tonic::Status::unavailable("down"))), Verdict::Failure);
/// assert_eq!(classify::<()>(&Err(tonic::Status::not_found("no sku"))), Verdict::Neutral);
/// ```
pub fn classify<T>(result: &Result<T, Status>) -> Verdict {
    match result {
        Ok(_) => Verdict::Success,
        Err(status) => judge(status.code(), || {
            table::pushback(status.metadata().get(table::PUSHBACK)?.to_str().ok()?)
        }),
    }
}

/// The key of a request's method, its path (`/pkg.Service/Method`): one breaker per method,
/// for [`CircuitBreakerLayer::grpc_keyed`] (or the plain layer's
/// [`keyed`](CircuitBreakerLayer::keyed)) over a [`KeyedBreaker<String>`]. Given as it is,
/// it needs no type annotation over a tonic `Channel` (a closure must name the request's
/// body type, `tonic::body::Body`). A path longer than 256 bytes is kept by a prefix and a
/// digest of it, as every HTTP key is, so a key costs what a short one does.
///
/// ```no_run
/// use breaker::{tower::CircuitBreakerLayer, Config, KeyedBreaker};
/// use tower::ServiceBuilder;
///
/// # async fn run() -> Result<(), breaker::grpc::BoxError> {
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
///     .connect()
///     .await?;
/// let per_method = KeyedBreaker::<String>::new("shop::methods", Config::default());
/// let channel = ServiceBuilder::new()
///     .layer(CircuitBreakerLayer::grpc_keyed(per_method, breaker::grpc::method))
///     .service(channel);
/// let mut client = tonic::client::Grpc::new(channel); // or a generated client
/// client.ready().await?;
/// # Ok(()) }
/// ```
pub fn method<B>(req: &http::Request<B>) -> String {
    breaker_runtime::__internals::bounded_key(req.uri().path()).into_owned()
}

/// The code of an answer's headers or trailers, when they carry one.
fn code_in(headers: &HeaderMap) -> Option<Code> {
    table::code_in(headers).map(Code::from)
}

/// The code an answer without `grpc-status` in its headers has by its HTTP status alone;
/// `None` for a `200`.
fn code_of_http(status: StatusCode) -> Option<Code> {
    table::code_of_http(status).map(Code::from)
}

impl CircuitBreakerLayer {
    /// A layer for gRPC clients (a tonic `Channel`, or any service of HTTP requests and
    /// responses): every call goes through `breaker`, judged by its `grpc-status` (in the
    /// headers, or in the trailers at the end of the response body), and a refusal reaches
    /// the caller as a [`tonic::Status`]. See the [module docs](crate::grpc).
    ///
    /// ```no_run
    /// use breaker::{tower::CircuitBreakerLayer, Breaker, Config};
    /// use tower::ServiceBuilder;
    ///
    /// # async fn run() -> Result<(), breaker::grpc::BoxError> {
    /// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
    ///     .connect()
    ///     .await?;
    /// let inventory = Breaker::new("docs::grpc_layer", Config::default().threshold(5));
    /// let channel = ServiceBuilder::new()
    ///     .layer(CircuitBreakerLayer::grpc(inventory))
    ///     .service(channel);
    /// let mut client = tonic::client::Grpc::new(channel); // or `InventoryClient::new(channel)`
    /// client.ready().await?;
    /// # Ok(()) }
    /// ```
    pub fn grpc(breaker: Breaker) -> GrpcLayer {
        GrpcLayer { pick: breaker }
    }

    /// [`grpc`](Self::grpc) with one breaker per key of `keyed`, `key(&request)`: per method
    /// with [`breaker::grpc::method`](crate::grpc::method) (the path, `/pkg.Service/Method`),
    /// or per authority. A closure of your own must name the request type a tonic `Channel`
    /// takes, `|req: &http::Request<tonic::body::Body>| …` (an unannotated `|req|` does not
    /// compile). Over a `Channel` a request's URI carries the authority only when the client
    /// was made with `Grpc::with_origin` (generated clients: `with_origin`); otherwise key by
    /// what the request does carry.
    ///
    /// ```no_run
    /// use breaker::{tower::CircuitBreakerLayer, Config, KeyedBreaker};
    /// use tower::ServiceBuilder;
    ///
    /// # async fn run() -> Result<(), breaker::grpc::BoxError> {
    /// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
    ///     .connect()
    ///     .await?;
    /// let per_method = KeyedBreaker::<String>::new("docs::grpc_methods", Config::default());
    /// let channel = ServiceBuilder::new()
    ///     .layer(CircuitBreakerLayer::grpc_keyed(per_method, breaker::grpc::method))
    ///     .service(channel);
    /// let mut client = tonic::client::Grpc::new(channel); // or `InventoryClient::new(channel)`
    /// client.ready().await?;
    /// # Ok(()) }
    /// ```
    pub fn grpc_keyed<K, F, Req, Q>(keyed: KeyedBreaker<K>, key: F) -> GrpcLayer<Keyed<K, F>>
    where
        K: BreakerKey + Borrow<Q>,
        F: Fn(&Req) -> Q,
        Q: Hash + Eq + ToOwned<Owned = K>,
    {
        GrpcLayer {
            pick: Keyed::new(keyed, key),
        }
    }
}

/// The layer [`CircuitBreakerLayer::grpc`] makes; `T` picks each request's breaker.
#[derive(Clone)]
pub struct GrpcLayer<T = Breaker> {
    pick: T,
}

impl<S, T: Clone> Layer<S> for GrpcLayer<T> {
    type Service = GrpcCircuitBreaker<S, T>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcCircuitBreaker {
            inner,
            pick: self.pick.clone(),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for GrpcLayer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcLayer")
            .field("pick", &self.pick)
            .finish()
    }
}

/// The service [`GrpcLayer`] makes: `inner` (a tonic `Channel`, say) behind a breaker.
#[derive(Clone)]
pub struct GrpcCircuitBreaker<S, T = Breaker> {
    inner: S,
    pick: T,
}

impl<S, T> GrpcCircuitBreaker<S, T> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug, T: fmt::Debug> fmt::Debug for GrpcCircuitBreaker<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcCircuitBreaker")
            .field("inner", &self.inner)
            .field("pick", &self.pick)
            .finish()
    }
}

impl<S, T, ReqBody, ResBody> Service<http::Request<ReqBody>> for GrpcCircuitBreaker<S, T>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    T: PickBreaker<http::Request<ReqBody>>,
    ReqBody: Send + 'static,
    ResBody: Body + Send + 'static,
{
    type Response = http::Response<GrpcBody<ResBody>>;
    type Error = BoxError;
    type Future = GrpcResponseFuture<ResBody>;

    /// The inner service's readiness, as it is.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let breaker = self.pick.pick(&req);
        // The readied service goes into the call; this one keeps a fresh clone.
        let fresh = self.inner.clone();
        let readied = std::mem::replace(&mut self.inner, fresh);
        let (handoff, handed) = oneshot::channel();
        let call = Call::<S, _, ResBody> {
            call: Readied::new(readied, req),
            handoff: Some(handoff),
            verdict: None,
        };
        GrpcResponseFuture {
            call: Some(Box::pin(
                breaker.call_owned_classified(carried as Carried<ResBody>, call),
            )),
            handed,
        }
    }
}

/// What the breaker's call gives: the whole answer (judged at its headers), or word that the
/// answer went to the caller and the verdict came from its trailers.
pub(crate) enum Answer<B> {
    Whole(http::Response<B>),
    HandedOff,
}

/// The call's result with the verdict it was given (by the headers, the trailers, or the
/// transport's error).
pub(crate) type Judged<B> = Result<(Answer<B>, Verdict), (BoxError, Verdict)>;

/// The classifier handed to the breaker: the verdict was reached inside the call, so it is a
/// plain `fn`.
pub(crate) type Carried<B> = fn(&Judged<B>) -> Verdict;

pub(crate) fn carried<B>(judged: &Judged<B>) -> Verdict {
    match judged {
        Ok((_, verdict)) | Err((_, verdict)) => *verdict,
    }
}

/// A response whose verdict waits for its trailers, and where to send that verdict.
pub(crate) type Handoff<B> = (http::Response<B>, oneshot::Sender<Verdict>);

/// What the breaker's call gives.
type Outcome<B> = Result<(Answer<B>, Verdict), CallError<(BoxError, Verdict)>>;

/// The breaker's call, type-erased: it lives in the response future until the headers
/// arrive, then (when the verdict waits for the trailers) in the response body.
pub(crate) type Pending<B> = Pin<Box<dyn Running<B>>>;

/// The breaker's call (a [`CallFuture`](crate::CallFuture)), as the layer holds it: a future,
/// told when its headers arrived.
pub(crate) trait Running<B>: Future<Output = Outcome<B>> + Send {
    /// The headers arrived, the verdict waits for the trailers: the call is timed no longer
    /// (`timeout`, `slow_call` and the abandoned rule stop here).
    fn answer_began(self: Pin<&mut Self>);
}

impl<B, F, P> Running<B> for crate::CallFuture<'static, F, P, Breaker>
where
    Self: Future<Output = Outcome<B>> + Send,
{
    fn answer_began(self: Pin<&mut Self>) {
        crate::CallFuture::answer_began(self);
    }
}

pin_project_lite::pin_project! {
    /// A call whose attempts the retry loop makes (`RetryLayer::grpc`): the attempt running
    /// when the headers arrive is inside the loop, out of reach, so a stream it answers is
    /// timed to its trailers (documented on `RetryLayer::grpc`).
    pub(crate) struct Retried<F> {
        #[pin]
        pub(crate) future: F,
    }
}

impl<F: Future> Future for Retried<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().future.poll(cx)
    }
}

impl<B, F> Running<B> for Retried<F>
where
    F: Future<Output = Outcome<B>> + Send,
{
    fn answer_began(self: Pin<&mut Self>) {}
}

pin_project_lite::pin_project! {
    /// The call the breaker admits: calls the readied inner service on its first poll; judges
    /// an answer whose headers carry its code, or hands the response out and waits for the
    /// verdict its body will send at the trailers.
    struct Call<S, Req, B>
    where
        S: Service<Req>,
    {
        #[pin]
        call: Readied<S, Req>,
        handoff: Option<oneshot::Sender<Handoff<B>>>,
        verdict: Option<oneshot::Receiver<Verdict>>,
    }
}

impl<S, Req, B> Future for Call<S, Req, B>
where
    S: Service<Req, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
{
    type Output = Judged<B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(waiting) = this.verdict.as_mut() {
            // The body dropped its sender without a verdict only if it is being dropped
            // itself, with this call inside it: nothing will read this.
            let verdict = ready!(Pin::new(waiting).poll(cx)).unwrap_or(Verdict::Neutral);
            return Poll::Ready(Ok((Answer::HandedOff, verdict)));
        }
        let result = ready!(this.call.poll(cx));
        let response = match result {
            Ok(response) => response,
            // No answer at all (the connection failed): a failure.
            Err(error) => return Poll::Ready(Err((error.into(), Verdict::Failure))),
        };
        let code = code_in(response.headers()).or_else(|| code_of_http(response.status()));
        if let Some(code) = code {
            let verdict = verdict(code, response.headers());
            return Poll::Ready(Ok((Answer::Whole(response), verdict)));
        }
        // A `200` without a code: the code comes in the trailers. The caller gets the
        // response now; its body sends the verdict when the trailers arrive.
        let (send, receive) = oneshot::channel();
        let handoff = this.handoff.take().expect("a response is handed out once");
        if handoff.send((response, send)).is_err() {
            // The response future is gone: nobody reads this answer.
            return Poll::Ready(Ok((Answer::HandedOff, Verdict::Neutral)));
        }
        let mut receive = receive;
        // Polled once so that it has this task's waker; the body sends on its own thread of
        // polls and then polls the call itself.
        match Pin::new(&mut receive).poll(cx) {
            Poll::Ready(verdict) => {
                Poll::Ready(Ok((Answer::HandedOff, verdict.unwrap_or(Verdict::Neutral))))
            }
            Poll::Pending => {
                *this.verdict = Some(receive);
                Poll::Pending
            }
        }
    }
}

/// The response future of [`GrpcCircuitBreaker`]: the response, with a body that judges the
/// call at its trailers; or the breaker's refusal as a [`Status`] in the boxed error.
pub struct GrpcResponseFuture<B> {
    call: Option<Pending<B>>,
    handed: oneshot::Receiver<Handoff<B>>,
}

impl<B> Future for GrpcResponseFuture<B> {
    type Output = Result<http::Response<GrpcBody<B>>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let call = this
            .call
            .as_mut()
            .expect("the gRPC breaker's response future polled after it finished");
        match call.as_mut().poll(cx) {
            Poll::Ready(result) => {
                this.call = None;
                Poll::Ready(match result {
                    Ok((Answer::Whole(response), _)) => Ok(response.map(|body| GrpcBody {
                        inner: body,
                        end: None,
                    })),
                    // A verdict for a response nobody read: cannot happen before the handoff
                    // was taken, below.
                    Ok((Answer::HandedOff, _)) => Err("the gRPC answer was lost".into()),
                    Err(CallError::Inner((error, _))) => Err(error),
                    Err(CallError::Breaker(refusal)) => Err(Box::new(Status::from(refusal))),
                })
            }
            Poll::Pending => match this.handed.try_recv() {
                Ok((response, verdict)) => {
                    // The messages are the caller's to time; the trailers judge the call.
                    call.as_mut().answer_began();
                    let call = this.call.take();
                    Poll::Ready(Ok(response.map(|body| GrpcBody {
                        inner: body,
                        end: call.map(|call| (call, verdict)),
                    })))
                }
                Err(_) => Poll::Pending,
            },
        }
    }
}

impl<B> fmt::Debug for GrpcResponseFuture<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcResponseFuture").finish_non_exhaustive()
    }
}

pin_project_lite::pin_project! {
    /// A response body that judges its call at its end: by the `grpc-status` of its trailers
    /// (`UNKNOWN` when it ends without one), or as a failure when it fails mid-stream.
    /// Dropped before its end, the call counts as cancelled.
    pub struct GrpcBody<B> {
        #[pin]
        inner: B,
        // The breaker's call, waiting for the verdict; `None` once judged (or judged at the
        // headers).
        end: Option<(Pending<B>, oneshot::Sender<Verdict>)>,
    }
}

impl<B> GrpcBody<B> {
    /// Sends the verdict and lets the breaker's call finish: it is ready at once.
    fn judge(
        end: &mut Option<(Pending<B>, oneshot::Sender<Verdict>)>,
        verdict: Verdict,
        cx: &mut Context<'_>,
    ) {
        if let Some((mut call, send)) = end.take() {
            let _ = send.send(verdict);
            let _ = call.as_mut().poll(cx);
        }
    }
}

impl<B: Body> Body for GrpcBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if this.end.is_some() {
            let verdict = match &frame {
                Some(Ok(frame)) => frame
                    .trailers_ref()
                    .map(|trailers| verdict(code_in(trailers).unwrap_or(Code::Unknown), trailers)),
                // Broken mid-stream: the dependency (or the way to it) failed.
                Some(Err(_)) => Some(Verdict::Failure),
                // Ended without trailers: truncated, as tonic's client reads it.
                None => Some(verdict(Code::Unknown, &HeaderMap::new())),
            };
            if let Some(verdict) = verdict {
                GrpcBody::judge(this.end, verdict, cx);
            }
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

impl<B> fmt::Debug for GrpcBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcBody")
            .field("judged", &self.end.is_none())
            .finish_non_exhaustive()
    }
}

/// One attempt of [`RetryLayer::grpc`](crate::retry::RetryLayer::grpc): the breaker's call of
/// the `readied` service, as [`GrpcCircuitBreaker`] makes it, and where it hands its response
/// out when the code waits for the trailers (a committed answer, never retried).
pub(crate) fn attempt<S, ReqBody, B>(
    readied: S,
    req: http::Request<ReqBody>,
) -> (
    impl Future<Output = Judged<B>> + Send,
    oneshot::Receiver<Handoff<B>>,
)
where
    S: Service<http::Request<ReqBody>, Response = http::Response<B>> + Send,
    S::Future: Send,
    S::Error: Into<BoxError>,
    ReqBody: Send,
    B: Send,
{
    let (handoff, handed) = oneshot::channel();
    let call = Call::<S, _, B> {
        call: Readied::new(readied, req),
        handoff: Some(handoff),
        verdict: None,
    };
    (call, handed)
}

impl<B> GrpcResponseFuture<B> {
    /// The response future of a call made elsewhere (`RetryLayer::grpc`'s attempts).
    pub(crate) fn new(call: Pending<B>, handed: oneshot::Receiver<Handoff<B>>) -> Self {
        GrpcResponseFuture {
            call: Some(call),
            handed,
        }
    }
}
