//! # health_endpoint: see and steer the breakers of a running service
//!
//! An open breaker is an incident signal, not a silent optimisation: on-call engineers need
//! to see it, dashboards need to graph it, and sometimes someone needs to act before it does.
//! This axum server shows the three ways `breaker` offers (features `metrics`, `serde`,
//! `dashboard`):
//!
//! | route | what |
//! | --- | --- |
//! | `GET /health/breakers` | every live breaker as JSON (`Snapshot`'s serde shape), and whether all are usable |
//! | `GET /metrics` | Prometheus text: `circuit_breaker_calls_total`, `_state`, `_transitions_total`, `_failure_rate` |
//! | `GET /dashboard` | the live page: states, rates, timelines, transitions as they happen |
//! | `POST /dashboard/breakers/{name}/force_open`, `…/disable`, `…/reset` | manual control (the page's buttons) |
//!
//! The dashboard sits behind a (toy) operator check, as a real service would put it behind its
//! own authentication: requests must carry `Authorization: Basic b3BzOnNlY3JldA==`
//! (user `ops`, password `secret`); a browser asks for them.
//!
//! The service guards two dependencies of its own, `shop::inventory` (healthy) and
//! `shop::recommendations` (fails two calls in three, so its breaker opens now and then); a
//! background task calls both every 200 ms so the figures move.
//!
//! ```text
//! cargo run --all-features --example health_endpoint            # serves on 127.0.0.1:3000 until Ctrl-C
//! BREAKER_QUICK=1 cargo run --all-features --example health_endpoint   # or --quick: a self-test
//! ```
//!
//! In quick mode it binds 127.0.0.1:0, calls its own endpoints with a tiny HTTP client,
//! prints what they answered, checks that force-open, disable and reset took effect and that
//! the metrics say so, and exits 0.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use breaker::{circuit_breaker, registry, BreakerError, State};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
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
    if !RECO_CALLS.fetch_add(1, Relaxed).is_multiple_of(3) {
        return Err(DepError::Unavailable);
    }
    Ok(vec![user, user + 1])
}

// ---- the routes ----------------------------------------------------------------------------------

/// Every live breaker, in `Snapshot`'s serde shape, and whether every one lets calls through.
async fn health() -> Json<Value> {
    let mut all = registry().snapshot();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    let healthy = all
        .iter()
        .all(|s| matches!(s.state, State::Closed | State::HalfOpen | State::Disabled));
    Json(json!({ "healthy": healthy, "breakers": all }))
}

/// Prometheus scrapes this: the call counts are copied from the breakers now (cheap), the
/// transitions were counted as they happened.
async fn prometheus_text(handle: PrometheusHandle) -> String {
    breaker::metrics::publish();
    handle.run_upkeep();
    handle.render()
}

/// Stands for the service's own authentication: one operator account, HTTP Basic.
async fn operators_only(req: Request, next: Next) -> Response {
    let expected = HeaderValue::from_static(OPS_AUTH);
    if req.headers().get(header::AUTHORIZATION) == Some(&expected) {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, r#"Basic realm="breakers""#)],
    )
        .into_response()
}

const OPS_AUTH: &str = "Basic b3BzOnNlY3JldA=="; // ops:secret

fn app(prometheus: PrometheusHandle) -> Router {
    Router::new()
        .route("/health/breakers", get(health))
        .route("/metrics", get(move || prometheus_text(prometheus.clone())))
        // `nest_service`: the page answers at both /dashboard and /dashboard/.
        .nest_service(
            "/dashboard",
            breaker::dashboard::router_with_controls().layer(middleware::from_fn(operators_only)),
        )
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
    auth: bool,
) -> Result<(StatusCode, String), Box<dyn std::error::Error>> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"));
    if auth {
        req = req.header(header::AUTHORIZATION, OPS_AUTH);
    }
    let res = client.request(req.body(Empty::new())?).await?;
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

/// The lines of the Prometheus text about `name`.
fn metric_lines(text: &str, name: &str) -> Vec<String> {
    let label = format!("breaker=\"{name}\"");
    text.lines()
        .filter(|l| l.contains(&label))
        .map(String::from)
        .collect()
}

async fn self_test(base: &str) -> Result<(), Box<dyn std::error::Error>> {
    // Some traffic first, so both breakers exist (a breaker is listed from its first call).
    for i in 0..30 {
        let _ = inventory(i).await;
        let _ = recommendations(i).await;
    }
    let (status, body) = request(base, Method::GET, "/health/breakers", false).await?;
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

    let (status, text) = request(base, Method::GET, "/metrics", false).await?;
    assert_eq!(status, StatusCode::OK);
    let reco = metric_lines(&text, "shop::recommendations");
    println!(
        "GET /metrics -> {status} (shop::recommendations)\n{}\n",
        reco.join("\n")
    );
    assert!(reco.contains(
        &r#"circuit_breaker_state{breaker="shop::recommendations",state="open"} 1"#.to_string()
    ));
    assert!(reco.contains(
        &r#"circuit_breaker_transitions_total{breaker="shop::recommendations",from="closed",to="open"} 1"#
            .to_string()
    ));

    let (status, _) = request(base, Method::GET, "/dashboard", false).await?;
    println!("GET /dashboard without credentials -> {status}");
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, page) = request(base, Method::GET, "/dashboard", true).await?;
    println!(
        "GET /dashboard as ops -> {status}, {} bytes of HTML\n",
        page.len()
    );
    assert!(page.contains("<title>Circuit breakers</title>"));

    let (status, body) = request(
        base,
        Method::POST,
        "/dashboard/breakers/shop::inventory/force_open",
        true,
    )
    .await?;
    println!(
        "POST /dashboard/breakers/shop::inventory/force_open -> {status}\n{}\n",
        pretty(&body)
    );
    assert_eq!(status, StatusCode::OK);
    let err = inventory(1).await.expect_err("forced open: fails fast");
    println!("inventory(1) while forced open: {err}\n");
    let (_, text) = request(base, Method::GET, "/metrics", false).await?;
    assert!(
        text.contains(r#"circuit_breaker_state{breaker="shop::inventory",state="forced_open"} 1"#)
    );
    assert!(text.contains(r#"circuit_breaker_state{breaker="shop::inventory",state="closed"} 0"#));

    let (status, _) = request(
        base,
        Method::POST,
        "/dashboard/breakers/shop::recommendations/disable",
        true,
    )
    .await?;
    println!("POST /dashboard/breakers/shop::recommendations/disable -> {status}");
    assert_eq!(
        state_in(
            &request(base, Method::GET, "/health/breakers", false)
                .await?
                .1,
            "shop::recommendations"
        )
        .as_deref(),
        Some("disabled")
    );

    for name in ["shop::inventory", "shop::recommendations"] {
        let path = format!("/dashboard/breakers/{name}/reset");
        let (status, _) = request(base, Method::POST, &path, true).await?;
        println!("POST {path} -> {status}");
        assert_eq!(status, StatusCode::OK);
    }
    assert!(inventory(2).await.is_ok(), "reset: closed again");

    let (status, body) = request(
        base,
        Method::POST,
        "/dashboard/breakers/shop::nope/reset",
        true,
    )
    .await?;
    println!(
        "POST /dashboard/breakers/shop::nope/reset -> {status}: {}",
        body.trim()
    );
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (_, body) = request(base, Method::GET, "/health/breakers", false).await?;
    println!("\nGET /health/breakers -> \n{}", pretty(&body));
    assert_eq!(
        state_in(&body, "shop::inventory").as_deref(),
        Some("closed")
    );
    let (_, text) = request(base, Method::GET, "/metrics", false).await?;
    println!(
        "\nGET /metrics (shop::inventory)\n{}",
        metric_lines(&text, "shop::inventory").join("\n")
    );
    println!(
        "\nquick check passed: JSON, Prometheus text, the dashboard behind its check, \
         force_open, disable and reset all work"
    );
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

    // The global recorder, then the descriptions. Series not written for two minutes (those
    // of breakers that are gone) leave the page.
    let prometheus = PrometheusBuilder::new()
        .idle_timeout(MetricKindMask::ALL, Some(Duration::from_secs(120)))
        .install_recorder()?;
    breaker::metrics::describe();

    if quick {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(async move { axum::serve(listener, app(prometheus)).await });
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
    // Between scrapes too, for exporters that push.
    let _publisher = breaker::metrics::spawn_publisher(Duration::from_secs(5));
    println!("serving on {base} (Ctrl-C to stop); try:\n");
    println!("  open {base}/dashboard   (user ops, password secret)");
    println!("  curl -s {base}/health/breakers");
    println!("  curl -s {base}/metrics");
    println!(
        "  curl -s -u ops:secret -X POST {base}/dashboard/breakers/shop::inventory/force_open"
    );
    println!("  curl -s -u ops:secret -X POST {base}/dashboard/breakers/shop::inventory/reset");
    axum::serve(listener, app(prometheus))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
            println!("\nstopping");
        })
        .await?;
    Ok(())
}
