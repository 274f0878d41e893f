//! A real tonic gRPC server on loopback whose answers the request scripts, and a client to
//! call it: for tests/grpc.rs and `examples/grpc.rs` (which includes this file with
//! `#[path]`). Written by hand with a codec of raw bytes, as `tonic-build` would generate it,
//! so no `protoc` and no build script.
//!
//! A request is a line of words, read by the server:
//! - `ok`: one message, then `OK`;
//! - `code C [pushback MS]`: the status `C` (a number), before any message (a Trailers-Only
//!   answer, its code in the headers), with `grpc-retry-pushback-ms: MS` when given;
//! - `hang`: never answers;
//! - `wait MS`: answers `OK` after `MS` milliseconds;
//! - `work`: what a real dependency does: `OK` after 2 ms while it is up, `UNAVAILABLE` after
//!   20 ms while it is down ([`Running::set_down`]);
//! - on the streaming method, `stream N code C [every MS] [after MS]`: the response headers
//!   (after `MS` milliseconds when given), then N messages (`MS` milliseconds apart when
//!   given, the first at once), then status `C` in the trailers.
#![allow(dead_code)]

use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};

use bytes::{Buf, BufMut};
use tonic::{
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    codegen::{http::uri::PathAndQuery, tokio_stream},
    server::NamedService,
    transport::Server,
    Code, Status,
};
use tower::Service;

/// The unary method's path.
pub const UNARY: &str = "/test.Backend/Unary";
/// The server-streaming method's path.
pub const STREAM: &str = "/test.Backend/Stream";

/// Messages as raw bytes: what a generated client's prost codec would be, minus protobuf.
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        Ok(Some(bytes.to_vec()))
    }
}

/// The server: counts the requests that reached it.
#[derive(Clone, Default)]
pub struct Backend {
    hits: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
}

impl NamedService for Backend {
    const NAME: &'static str = "test.Backend";
}

/// The words of a request.
fn words(request: &tonic::Request<Vec<u8>>) -> Vec<String> {
    String::from_utf8_lossy(request.get_ref())
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The status `code C [pushback MS]` asks for.
fn scripted(words: &[String]) -> Status {
    let code = words[1].parse::<i32>().expect("a status code");
    let mut status = Status::new(Code::from(code), format!("scripted {code}"));
    if words.get(2).map(String::as_str) == Some("pushback") {
        let value = words[3].parse().expect("a pushback value");
        status
            .metadata_mut()
            .insert("grpc-retry-pushback-ms", value);
    }
    status
}

async fn unary(
    down: bool,
    request: tonic::Request<Vec<u8>>,
) -> Result<tonic::Response<Vec<u8>>, Status> {
    let words = words(&request);
    match words[0].as_str() {
        "work" if down => {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err(Status::unavailable("the dependency is down"))
        }
        "work" => {
            tokio::time::sleep(Duration::from_millis(2)).await;
            Ok(tonic::Response::new(b"done".to_vec()))
        }
        "ok" => Ok(tonic::Response::new(b"fine".to_vec())),
        "code" => Err(scripted(&words)),
        "wait" => {
            let ms = words[1].parse().expect("milliseconds");
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(tonic::Response::new(b"late".to_vec()))
        }
        "hang" => std::future::pending().await,
        other => Err(Status::invalid_argument(format!("unknown script {other}"))),
    }
}

type Messages = tokio_stream::wrappers::ReceiverStream<Result<Vec<u8>, Status>>;

/// The milliseconds after the word `name` in `words`, if it is there.
fn option_ms(words: &[String], name: &str) -> Option<Duration> {
    let at = words.iter().position(|w| w == name)?;
    let ms = words[at + 1].parse().expect("milliseconds");
    Some(Duration::from_millis(ms))
}

async fn stream(request: tonic::Request<Vec<u8>>) -> Result<tonic::Response<Messages>, Status> {
    let words = words(&request);
    let count: usize = words[1].parse().expect("a message count");
    let end = scripted(&words[2..]);
    let every = option_ms(&words, "every");
    if let Some(after) = option_ms(&words, "after") {
        tokio::time::sleep(after).await;
    }
    let (send, messages) = tokio::sync::mpsc::channel(count + 1);
    tokio::spawn(async move {
        for i in 0..count {
            if let (Some(every), true) = (every, i > 0) {
                tokio::time::sleep(every).await;
            }
            if send
                .send(Ok(format!("message {i}").into_bytes()))
                .await
                .is_err()
            {
                return; // the client went away
            }
        }
        if end.code() != Code::Ok {
            let _ = send.send(Err(end)).await;
        }
    });
    Ok(tonic::Response::new(
        tokio_stream::wrappers::ReceiverStream::new(messages),
    ))
}

impl Service<http::Request<tonic::body::Body>> for Backend {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        self.hits.fetch_add(1, Ordering::SeqCst);
        let down = self.down.load(Ordering::SeqCst);
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(Raw);
            Ok(match request.uri().path() {
                UNARY => {
                    let unary = tower::service_fn(move |request| unary(down, request));
                    grpc.unary(unary, request).await
                }
                STREAM => {
                    grpc.server_streaming(tower::service_fn(stream), request)
                        .await
                }
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

/// A running server: its address and how many requests reached it.
pub struct Running {
    pub addr: SocketAddr,
    backend: Backend,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Requests that reached the server so far.
    pub fn hits(&self) -> usize {
        self.backend.hits.load(Ordering::SeqCst)
    }

    /// Takes the dependency down (`work` fails) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.backend.down.store(down, Ordering::SeqCst);
    }

    /// The endpoint's URL, for `Endpoint::from_shared`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A `Channel` to it, connected.
    pub async fn channel(&self) -> tonic::transport::Channel {
        tonic::transport::Endpoint::from_shared(self.url())
            .expect("a loopback URL")
            .connect()
            .await
            .expect("the test server accepts connections")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the server on a free loopback port.
pub async fn start() -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let addr = listener.local_addr().expect("its address");
    let backend = Backend::default();
    let served = backend.clone();
    let task = tokio::spawn(async move {
        Server::builder()
            .add_service(served)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .expect("the test server runs");
    });
    Running {
        addr,
        backend,
        task,
    }
}

/// A unary call through any gRPC service (the layered channel): the reply's text, or the
/// status the client got.
pub async fn call<S>(service: S, script: &str) -> Result<String, Status>
where
    S: tonic::client::GrpcService<tonic::body::Body>,
    S::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <S::ResponseBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut client = tonic::client::Grpc::new(service);
    client
        .ready()
        .await
        .map_err(|e| Status::from_error(e.into()))?;
    let reply = client
        .unary(
            tonic::Request::new(script.as_bytes().to_vec()),
            PathAndQuery::from_static(UNARY),
            Raw,
        )
        .await?;
    Ok(String::from_utf8_lossy(reply.get_ref()).into_owned())
}

/// A server-streaming call: the messages the client read before the stream ended, and how it
/// ended. With `read` given, reads that many messages and drops the stream.
pub async fn call_stream<S>(
    service: S,
    script: &str,
    read: Option<usize>,
) -> (usize, Result<(), Status>)
where
    S: tonic::client::GrpcService<tonic::body::Body>,
    S::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <S::ResponseBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut client = tonic::client::Grpc::new(service);
    if let Err(e) = client.ready().await {
        return (0, Err(Status::from_error(e.into())));
    }
    let response = client
        .server_streaming(
            tonic::Request::new(script.as_bytes().to_vec()),
            PathAndQuery::from_static(STREAM),
            Raw,
        )
        .await;
    let mut stream = match response {
        Ok(response) => response.into_inner(),
        Err(status) => return (0, Err(status)),
    };
    let mut got = 0;
    loop {
        if read == Some(got) {
            return (got, Ok(()));
        }
        match stream.message().await {
            Ok(Some(_)) => got += 1,
            Ok(None) => return (got, Ok(())),
            Err(status) => return (got, Err(status)),
        }
    }
}
