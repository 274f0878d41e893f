//! # health_endpoint: see and steer the breakers of a running service
//!
//! An open breaker is an incident signal, not a silent optimisation: on-call engineers need
//! to see it, and sometimes to act before it does. This axum server exposes
//! `breaker::registry().snapshot()` as JSON and puts manual control behind POST routes:
//!
//! | route | what it does |
//! | --- | --- |
//! | `GET /health/breakers` | every breaker created so far: state, counts, failure rate, time left open |
//! | `POST /health/breakers/{name}/force_open` | open it by hand (a dependency in maintenance): calls fail fast until reset |
//! | `POST /health/breakers/{name}/disable` | let every call through, still counting (when the breaker itself is the problem) |
//! | `POST /health/breakers/{name}/reset` | closed, counts cleared |
//!
//! The service guards two dependencies of its own, `shop::inventory` (healthy) and
//! `shop::recommendations` (fails two calls in three, so its breaker opens now and then); a
//! background task calls both every 200 ms so the figures move.
//!
//! ```text
//! cargo run --example health_endpoint            # serves on 127.0.0.1:3000 until Ctrl-C
//! BREAKER_QUICK=1 cargo run --example health_endpoint   # or --quick: a self-test
//! ```
//!
//! In quick mode it binds 127.0.0.1:0, calls its own endpoints with a tiny HTTP client,
//! prints what they answered, checks that force-open, disable and reset took effect, and
//! exits 0.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{Method, Request, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use breaker::{circuit_breaker, registry, BreakerError, Snapshot, State};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

// ---- the service's own dependencies ------------------------------------------------------------

#[derive(Debug, thiserror::Error)]
enum DepError {
    #[error("recommendations service answered 503")]
    Unavailable,
    #[error(transparent)]
    Breaker(#[from] BreakerError),
}

#[circuit_breaker(
    threshold = 5,
    cool_off = "10s",
    timeout = "300ms",
    name = "shop::inventory"
)]
async fn inventory(sku: u64) -> Result<u64, DepError> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    Ok(sku % 17)
}

static RECO_CALLS: AtomicU64 = AtomicU64::new(0);

#[circuit_breaker(
    failure_rate = 50,
    window = 20,
    cool_off = "5s",
    timeout = "300ms",
    name = "shop::recommendations"
)]
async fn recommendations(user: u64) -> Result<Vec<u64>, DepError> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    if RECO_CALLS.fetch_add(1, Relaxed) % 3 != 0 {
        return Err(DepError::Unavailable);
    }
    Ok(vec![user, user + 1])
}

// ---- the routes ----------------------------------------------------------------------------------

fn to_json(s: &Snapshot) -> Value {
    json!({
        "name": s.name,
        "state": s.state.as_str(),
        "failure_rate_percent": s.failure_rate,
        "retry_in_ms": s.retry_in.map(|d| d.as_millis() as u64),
        "stats": {
            "calls": s.stats.calls,
            "successes": s.stats.successes,
            "failures": s.stats.failures,
            "timeouts": s.stats.timeouts,
            "slow_calls": s.stats.slow_calls,
            "rejected": s.stats.rejected,
        },
    })
}

async fn list() -> Json<Value> {
    let mut all = registry().snapshot();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    let healthy = all
        .iter()
        .all(|s| matches!(s.state, State::Closed | State::HalfOpen | State::Disabled));
    Json(json!({
        "healthy": healthy,
        "breakers": all.iter().map(to_json).collect::<Vec<_>>(),
    }))
}

async fn control(
    Path((name, action)): Path<(String, String)>,
) -> Result<Json<Value>, (StatusCode, String)> {
    let handle = registry().get(&name).ok_or((
        StatusCode::NOT_FOUND,
        format!("no breaker named `{name}`\n"),
    ))?;
    match action.as_str() {
        "force_open" => handle.force_open(),
        "disable" => handle.disable(),
        "reset" => handle.reset(),
        other => {
            return Err((
                StatusCode::NOT_FOUND,
                format!("unknown action `{other}`: use force_open, disable or reset\n"),
            ))
        }
    }
    Ok(Json(to_json(&handle.snapshot())))
}

fn app() -> Router {
    Router::new()
        .route("/health/breakers", get(list))
        .route("/health/breakers/{name}/{action}", post(control))
}

/// Calls both dependencies every 200 ms, as the service's own traffic would.
async fn traffic() {
    let mut every = tokio::time::interval(Duration::from_millis(200));
    for i in 0u64.. {
        every.tick().await;
        let _ = inventory(i).await;
        let _ = recommendations(i).await;
    }
}

// ---- quick mode: a tiny client against our own endpoints ------------------------------------------

async fn request(
    base: &str,
    method: Method,
    path: &str,
) -> Result<(StatusCode, String), Box<dyn std::error::Error>> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let req = Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .body(Empty::new())?;
    let res = client.request(req).await?;
    let status = res.status();
    let body = res.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn state_in(listing: &str, name: &str) -> Option<String> {
    let v: Value = serde_json::from_str(listing).ok()?;
    v["breakers"]
        .as_array()?
        .iter()
        .find(|b| b["name"] == name)
        .and_then(|b| b["state"].as_str().map(String::from))
}

async fn self_test(base: &str) -> Result<(), Box<dyn std::error::Error>> {
    // Some traffic first, so both breakers exist (a breaker is listed from its first call).
    for i in 0..30 {
        let _ = inventory(i).await;
        let _ = recommendations(i).await;
    }
    let (status, body) = request(base, Method::GET, "/health/breakers").await?;
    println!("GET /health/breakers -> {status}\n{}\n", pretty(&body));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        state_in(&body, "shop::inventory").as_deref(),
        Some("closed")
    );
    assert_eq!(
        state_in(&body, "shop::recommendations").as_deref(),
        Some("open")
    );

    let (status, body) = request(
        base,
        Method::POST,
        "/health/breakers/shop::inventory/force_open",
    )
    .await?;
    println!(
        "POST /health/breakers/shop::inventory/force_open -> {status}\n{}\n",
        pretty(&body)
    );
    assert_eq!(status, StatusCode::OK);
    let err = inventory(1).await.expect_err("forced open: fails fast");
    println!("inventory(1) while forced open: {err}\n");

    let (status, body) = request(
        base,
        Method::POST,
        "/health/breakers/shop::recommendations/disable",
    )
    .await?;
    println!(
        "POST /health/breakers/shop::recommendations/disable -> {status}\n{}\n",
        pretty(&body)
    );
    assert_eq!(
        state_in(
            &request(base, Method::GET, "/health/breakers").await?.1,
            "shop::recommendations"
        )
        .as_deref(),
        Some("disabled")
    );

    for name in ["shop::inventory", "shop::recommendations"] {
        let (status, body) = request(
            base,
            Method::POST,
            &format!("/health/breakers/{name}/reset"),
        )
        .await?;
        println!(
            "POST /health/breakers/{name}/reset -> {status}\n{}\n",
            pretty(&body)
        );
        assert_eq!(status, StatusCode::OK);
    }
    assert!(inventory(2).await.is_ok(), "reset: closed again");

    let (status, body) = request(base, Method::POST, "/health/breakers/shop::nope/reset").await?;
    println!(
        "POST /health/breakers/shop::nope/reset -> {status}: {}",
        body.trim()
    );
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (_, body) = request(base, Method::GET, "/health/breakers").await?;
    println!("\nGET /health/breakers -> \n{}", pretty(&body));
    assert_eq!(
        state_in(&body, "shop::inventory").as_deref(),
        Some("closed")
    );
    println!("\nquick check passed: listing, force_open, disable and reset all work");
    Ok(())
}

fn pretty(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|_| body.to_string())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::var("BREAKER_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
        || std::env::args().any(|a| a == "--quick");

    if quick {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(async move { axum::serve(listener, app()).await });
        let result = self_test(&base).await;
        server.abort();
        return result;
    }

    let listener = match tokio::net::TcpListener::bind("127.0.0.1:3000").await {
        Ok(l) => l,
        Err(_) => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
    };
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(traffic());
    println!("serving on {base} (Ctrl-C to stop); try:\n");
    println!("  curl -s {base}/health/breakers");
    println!("  curl -s -X POST {base}/health/breakers/shop::inventory/force_open");
    println!("  curl -s -X POST {base}/health/breakers/shop::recommendations/disable");
    println!("  curl -s -X POST {base}/health/breakers/shop::inventory/reset");
    axum::serve(listener, app())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
            println!("\nstopping");
        })
        .await?;
    Ok(())
}
