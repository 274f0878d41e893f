//! Hedging in `breaker::reqwest::CircuitBreakerMiddleware` against a real loopback HTTP
//! server whose first answer is slow: an idempotent request is hedged and the fast answer
//! wins; a `POST` and a streamed body are never hedged.
#![cfg(feature = "reqwest")]

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::{Duration, Instant},
};

use axum::{extract::State, Router};
use breaker::{reqwest::CircuitBreakerMiddleware, Config, HedgeDelay};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

/// How long the slow first answer takes: the hedge (after 20 ms) answers long before.
const SLOW: Duration = Duration::from_millis(600);

/// A server on loopback whose first request is answered after [`SLOW`], every other one at
/// once; each answer says which request it was (`answer N`). A request to `/flaky` is
/// answered 503 the first time (the server's first request is never one).
struct Server {
    url: String,
    host_port: String,
    hits: Arc<AtomicUsize>,
}

impl Server {
    async fn start() -> Server {
        let hits = Arc::new(AtomicUsize::new(0));
        let flaky = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .fallback(
                |State((hits, flaky)): State<(Arc<AtomicUsize>, Arc<AtomicUsize>)>,
                 uri: axum::http::Uri| async move {
                    let n = hits.fetch_add(1, SeqCst);
                    if n == 0 {
                        tokio::time::sleep(SLOW).await;
                    }
                    if uri.path() == "/flaky" && flaky.fetch_add(1, SeqCst) == 0 {
                        return (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("answer {n}"),
                        );
                    }
                    (axum::http::StatusCode::OK, format!("answer {n}"))
                },
            )
            .with_state((hits.clone(), flaky));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Server {
            url: format!("http://{addr}/items"),
            host_port: addr.to_string(),
            hits,
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(SeqCst)
    }
}

fn hedging() -> (CircuitBreakerMiddleware, ClientWithMiddleware) {
    with_config(
        Config::default()
            .hedge(1)
            .hedge_delay(HedgeDelay::Fixed(Duration::from_millis(20))),
    )
}

fn with_config(config: Config) -> (CircuitBreakerMiddleware, ClientWithMiddleware) {
    let breakers = CircuitBreakerMiddleware::with_config(config);
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(breakers.clone())
        .build();
    (breakers, client)
}

#[tokio::test]
async fn a_slow_idempotent_request_is_hedged_and_the_fast_answer_wins() {
    let server = Server::start().await;
    let (breakers, client) = hedging();
    for method in [reqwest::Method::GET, reqwest::Method::PUT] {
        let before = server.hits();
        let started = Instant::now();
        let answer = client
            .request(method.clone(), &server.url)
            .body("the same body twice")
            .send()
            .await
            .unwrap();
        let text = answer.text().await.unwrap();
        if before == 0 {
            // The first request of the server is the slow one: the hedge answered.
            assert_eq!(text, "answer 1", "{method}");
            assert!(started.elapsed() < SLOW, "{:?}", started.elapsed());
            assert_eq!(server.hits(), 2);
        } else {
            // Fast: answered before the delay, never hedged.
            assert_eq!(text, format!("answer {before}"), "{method}");
            assert_eq!(server.hits(), before + 1);
        }
    }
    let stats = breakers.breaker(&server.host_port).stats();
    assert_eq!((stats.hedges, stats.hedges_won), (1, 1));
    assert_eq!((stats.successes, stats.cancelled), (2, 1), "{stats:?}");
}

#[tokio::test]
async fn a_post_is_never_hedged() {
    let server = Server::start().await;
    let (breakers, client) = hedging();
    let started = Instant::now();
    let answer = client.post(&server.url).body("order 1").send().await;
    assert_eq!(answer.unwrap().text().await.unwrap(), "answer 0");
    assert!(started.elapsed() >= SLOW, "it waited for its one answer");
    assert_eq!(server.hits(), 1, "sent once");
    assert_eq!(breakers.breaker(&server.host_port).stats().hedges, 0);
}

#[tokio::test]
async fn a_streamed_body_is_never_hedged() {
    let server = Server::start().await;
    let (breakers, client) = hedging();
    // A body reqwest cannot copy (`try_clone` gives `None`): it can be sent once.
    let streamed = http_body_util::Full::new(bytes::Bytes::from_static(b"streamed"));
    let started = Instant::now();
    let answer = client
        .put(&server.url)
        .body(reqwest::Body::wrap(streamed))
        .send()
        .await;
    assert_eq!(answer.unwrap().text().await.unwrap(), "answer 0");
    assert!(started.elapsed() >= SLOW, "it waited for its one answer");
    assert_eq!(server.hits(), 1, "sent once");
    assert_eq!(breakers.breaker(&server.host_port).stats().hedges, 0);
}

/// With both `hedge` and `retry`: the idempotent request is hedged, the `POST` retried, none
/// both.
#[tokio::test]
async fn with_retry_too_a_get_is_hedged_and_a_post_retried() {
    let server = Server::start().await;
    let (breakers, client) = with_config(
        Config::default()
            .hedge(1)
            .hedge_delay(HedgeDelay::Fixed(Duration::from_millis(20)))
            .retry(2)
            .backoff(Duration::from_millis(1)),
    );
    let answer = client.get(&server.url).send().await.unwrap();
    assert_eq!(answer.text().await.unwrap(), "answer 1", "the hedge's");
    let flaky = server.url.replace("/items", "/flaky");
    let answer = client.post(&flaky).body("order 1").send().await.unwrap();
    assert_eq!(answer.status(), 200, "the retry's answer");
    assert_eq!(server.hits(), 4, "GET and its hedge, POST and its retry");
    let s = breakers.breaker(&server.host_port).stats();
    assert_eq!((s.hedges, s.retries), (1, 1), "{s:?}");
}
