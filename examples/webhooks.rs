//! # webhooks: one breaker per customer endpoint, in bounded memory
//!
//! A platform delivers webhooks to its customers' endpoints. Fifty customers, on one real
//! HTTP server on loopback standing in for their fifty hosts; three of them are broken:
//! `customer-07` answers 503, `customer-23` refuses with 500, and `customer-41` hangs for
//! two seconds before answering. The sender delivers a stream of webhooks, every endpoint
//! in every round, each delivery on its own task, through one keyed breaker:
//!
//! ```text
//! #[circuit_breaker(key = endpoint.host(), threshold = 3, cool_off = "30s", timeout = "250ms")]
//! async fn deliver(endpoint: &Endpoint, event: &str) -> Result<(), HookError> { … }
//! ```
//!
//! Each customer host has a breaker of its own (`hooks::deliver[customer-07.example]`):
//! the three broken ones open after three failures and are skipped from then on, so the
//! sender stops hammering them, and the forty-seven healthy ones never wait behind them:
//! no healthy delivery takes longer than the healthy server does.
//!
//! Then `--keys N` (default 100 000; 20 000 in quick mode) distinct endpoints pass through
//! a keyed breaker bounded to `max_keys = 10 000`: the number of live breakers never
//! exceeds the bound, and the open ones are kept while fresh ones are dropped.
//!
//! ```text
//! cargo run --example webhooks                       # 12 rounds, then 100 000 keys
//! cargo run --example webhooks -- --keys 1000000     # a bigger stream of keys
//! BREAKER_QUICK=1 cargo run --example webhooks       # 4 rounds, 20 000 keys (CI)
//! ```

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU32, Ordering::SeqCst},
        Arc,
    },
    time::{Duration, Instant},
};

use axum::{extract::Path, http::StatusCode, routing::post, Router};
use breaker::{registry, CallError, Config, KeyedBreaker, State};
use http_body_util::{BodyExt, Full};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::TokioExecutor,
};

const CUSTOMERS: u32 = 50;
const BROKEN_503: u32 = 7;
const BROKEN_500: u32 = 23;
const SLOW: u32 = 41;

/// A customer's endpoint: the host it would have in production, and where it really is.
#[derive(Clone)]
struct Endpoint {
    host: String,
    url: String,
}

impl Endpoint {
    fn host(&self) -> &str {
        &self.host
    }
}

#[derive(Debug)]
enum HookError {
    Status(u16),
    Transport(String),
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::Status(s) => write!(f, "answered {s}"),
            HookError::Transport(e) => write!(f, "transport: {e}"),
        }
    }
}

type Http = Client<HttpConnector, Full<axum::body::Bytes>>;

/// Delivers one webhook; a non-2xx answer is an error of the endpoint.
async fn send(http: &Http, endpoint: &Endpoint, event: &str) -> Result<(), HookError> {
    let req = axum::http::Request::post(&endpoint.url)
        .header("host", &endpoint.host)
        .body(Full::from(event.to_owned()))
        .expect("a valid request");
    let resp = http
        .request(req)
        .await
        .map_err(|e| HookError::Transport(e.to_string()))?;
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(HookError::Status(status))
    }
}

/// The customers' side: fifty endpoints on one loopback server.
async fn serve_customers(hits: Arc<Vec<AtomicU32>>) -> std::io::Result<String> {
    let app = Router::new().route(
        "/hooks/{customer}",
        post(move |Path(customer): Path<u32>| {
            let hits = hits.clone();
            async move {
                hits[customer as usize].fetch_add(1, SeqCst);
                match customer {
                    BROKEN_503 => StatusCode::SERVICE_UNAVAILABLE,
                    BROKEN_500 => StatusCode::INTERNAL_SERVER_ERROR,
                    SLOW => {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        StatusCode::OK
                    }
                    _ => StatusCode::NO_CONTENT,
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

fn arg(name: &str) -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == name {
            return args.next();
        }
    }
    None
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::var("BREAKER_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
        || std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 4 } else { 12 };
    let keys: u64 = match arg("--keys") {
        Some(n) => n.parse()?,
        None if quick => 20_000,
        None => 100_000,
    };

    let hits: Arc<Vec<AtomicU32>> = Arc::new((0..CUSTOMERS).map(|_| AtomicU32::new(0)).collect());
    let base = serve_customers(hits.clone()).await?;
    let endpoints: Vec<Endpoint> = (0..CUSTOMERS)
        .map(|i| Endpoint {
            host: format!("customer-{i:02}.example"),
            url: format!("{base}/hooks/{i}"),
        })
        .collect();
    let http: Http = Client::builder(TokioExecutor::new()).build_http();

    let deliver = KeyedBreaker::<String>::new(
        "hooks::deliver",
        Config::default()
            .threshold(3)
            .cool_off(Duration::from_secs(30))
            .timeout(Duration::from_millis(250)),
    );

    println!("Delivering to {CUSTOMERS} customer endpoints, {rounds} rounds; 3 are broken.");
    println!("round | open breakers                                   | healthy: slowest delivery");
    let mut slowest_healthy = Duration::ZERO;
    let mut skipped = 0u32;
    let mut why = BTreeMap::new();
    for round in 1..=rounds {
        let mut tasks = Vec::new();
        for endpoint in &endpoints {
            let (deliver, http, endpoint) = (deliver.clone(), http.clone(), endpoint.clone());
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                let event = format!("{{\"event\":\"order.paid\",\"round\":{round}}}");
                let r = deliver
                    .call(endpoint.host(), send(&http, &endpoint, &event))
                    .await;
                (endpoint.host, started.elapsed(), r)
            }));
        }
        for t in tasks {
            let (host, took, r) = t.await?;
            let broken = [BROKEN_503, BROKEN_500, SLOW]
                .iter()
                .any(|b| host == format!("customer-{b:02}.example"));
            if !broken {
                assert!(r.is_ok(), "{host}: {r:?}");
                slowest_healthy = slowest_healthy.max(took);
            }
            match r {
                Err(CallError::Breaker(e)) if e.is_open() => skipped += 1,
                Err(CallError::Breaker(e)) => {
                    why.insert(host, e.to_string());
                }
                Err(CallError::Inner(e)) => {
                    why.insert(host, e.to_string());
                }
                Ok(()) => {}
            }
        }
        let open: Vec<String> = endpoints
            .iter()
            .filter(|e| deliver.breaker(e.host()).state() == State::Open)
            .map(|e| e.host.trim_end_matches(".example").to_owned())
            .collect();
        println!(
            "{round:>5} | {:<47} | {:>6.1} ms",
            open.join(", "),
            slowest_healthy.as_secs_f64() * 1e3
        );
    }
    let reached = |i: u32| hits[i as usize].load(SeqCst);
    println!();
    for (host, e) in &why {
        println!("{host} failed: {e}");
    }
    println!(
        "Deliveries skipped while a breaker was open: {skipped}. Requests that reached the \
         broken endpoints over {rounds} rounds: customer-07 {}, customer-23 {}, customer-41 {} \
         (3 each before they opened; without breakers: {rounds} each).",
        reached(BROKEN_503),
        reached(BROKEN_500),
        reached(SLOW)
    );
    for b in [BROKEN_503, BROKEN_500, SLOW] {
        assert_eq!(reached(b), 3, "a broken endpoint is left alone once open");
    }
    println!(
        "The 47 healthy endpoints never waited behind them: the slowest healthy delivery took \
         {:.1} ms, while customer-41 takes 2000 ms to answer.",
        slowest_healthy.as_secs_f64() * 1e3
    );
    assert!(slowest_healthy < Duration::from_millis(2000));

    // The memory bound: many distinct endpoints through a bounded keyed breaker.
    let max_keys = 10_000;
    let bounded = KeyedBreaker::<String>::new(
        "hooks::bounded",
        Config::default().threshold(1).max_keys(max_keys),
    );
    let started = Instant::now();
    let mut most = 0;
    let mut open_kept = BTreeMap::new();
    for i in 0..keys {
        let host = format!("tenant-{i}.example");
        // Every 1000th endpoint is dead: its breaker opens and holds state worth keeping.
        let dead = i % 1000 == 0;
        let _ = bounded.call_sync(&host, || if dead { Err(()) } else { Ok(()) });
        if dead {
            open_kept.insert(i, host);
        }
        most = most.max(bounded.len());
    }
    let still_open = open_kept
        .values()
        .filter(|h| registry().get(format!("hooks::bounded[{h}]")).is_some())
        .count();
    println!();
    println!(
        "{keys} distinct endpoints through `max_keys = {max_keys}` in {:.2} s: at most {most} \
         breakers were live at once (now {}); {still_open} of the {} open breakers are still \
         there (only fresh ones are evicted while any exists).",
        started.elapsed().as_secs_f64(),
        bounded.len(),
        open_kept.len()
    );
    assert!(most <= max_keys);
    assert_eq!(still_open, open_kept.len().min(max_keys));
    Ok(())
}
