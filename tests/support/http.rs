//! A scripted HTTP server on loopback (real axum, real sockets) for the tower and reqwest
//! tests: it answers every request with the status and `Retry-After` it is told to, and
//! counts the requests that reached it.
#![allow(dead_code)]

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
};

use axum::{extract::State, http::StatusCode, response::IntoResponse, Router};

/// What the server answers now, and how many requests reached it.
#[derive(Default)]
pub struct Script {
    answer: Mutex<(u16, Option<String>)>,
    hits: AtomicUsize,
}

/// A running server: its address and its script.
#[derive(Clone)]
pub struct Server {
    pub addr: SocketAddr,
    script: Arc<Script>,
}

impl Server {
    /// Starts a server on 127.0.0.1 (a free port) that answers 200 until told otherwise.
    pub async fn start() -> Server {
        let script = Arc::new(Script {
            answer: Mutex::new((200, None)),
            hits: AtomicUsize::new(0),
        });
        let app = Router::new().fallback(answer).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Server { addr, script }
    }

    /// From now on answer `status`, with `Retry-After: retry_after` when given.
    pub fn answer(&self, status: u16, retry_after: Option<&str>) {
        *self.script.answer.lock().unwrap() = (status, retry_after.map(str::to_owned));
    }

    /// Requests that reached the server so far.
    pub fn hits(&self) -> usize {
        self.script.hits.load(Ordering::SeqCst)
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `127.0.0.1:PORT`, the middleware's key for this server.
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }
}

async fn answer(State(script): State<Arc<Script>>) -> impl IntoResponse {
    script.hits.fetch_add(1, Ordering::SeqCst);
    let (status, retry_after) = script.answer.lock().unwrap().clone();
    let mut response = (StatusCode::from_u16(status).unwrap(), "answer").into_response();
    if let Some(value) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", value.parse().unwrap());
    }
    response
}
