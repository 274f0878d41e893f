//! An HTTP client that stays away from a sick service exactly as long as the service asked.
//!
//! Two services run on loopback (real axum servers on their own ports): `inventory` has an
//! outage and answers `503` with `Retry-After: 3`; `pricing` comes under load and answers
//! `429` with `Retry-After: 2`. The client is reqwest with `reqwest-retry` outside and
//! `breaker::reqwest::CircuitBreakerMiddleware` inside (one breaker per `host:port`). Every
//! tick it asks both services and prints what happened and each breaker's state and
//! `retry_in`: the first 503 opens inventory's breaker for 3 s, the calls of the next 3 s are
//! refused on the client without touching the network, and the first call the service sees
//! again comes 3 s after it asked; pricing's breaker is untouched by inventory's outage.
//!
//! Run: `cargo run --example http_client --features reqwest`.
//! `BREAKER_QUICK=1` shortens every wait (`Retry-After: 1`) so it finishes in a few seconds.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{extract::State as Extract, http::StatusCode, response::IntoResponse, Router};
use breaker::{
    reqwest::{breaker_error, CircuitBreakerMiddleware},
    State,
};
use reqwest_middleware::ClientBuilder;
use reqwest_retry::{policies::ExponentialBackoff, RetryTransientMiddleware};
use tokio::time::Instant;

/// What a service answers now, and when it last saw a request.
struct Service {
    name: &'static str,
    answer: Mutex<(u16, Option<u64>)>,
    last_seen: Mutex<Option<Instant>>,
    started: Instant,
}

impl Service {
    fn set(&self, status: u16, retry_after: Option<u64>) {
        *self.answer.lock().unwrap() = (status, retry_after);
    }
}

async fn handle(Extract(svc): Extract<Arc<Service>>) -> impl IntoResponse {
    let now = Instant::now();
    *svc.last_seen.lock().unwrap() = Some(now);
    let (status, retry_after) = *svc.answer.lock().unwrap();
    println!(
        "  [{:>5.2}s] {:<9} server got a request, answers {status}{}",
        now.duration_since(svc.started).as_secs_f64(),
        svc.name,
        retry_after.map_or(String::new(), |s| format!(" (Retry-After: {s})")),
    );
    let mut response = (StatusCode::from_u16(status).unwrap(), svc.name).into_response();
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", secs.to_string().parse().unwrap());
    }
    response
}

async fn serve(name: &'static str, started: Instant) -> (SocketAddr, Arc<Service>) {
    let svc = Arc::new(Service {
        name,
        answer: Mutex::new((200, None)),
        last_seen: Mutex::new(None),
        started,
    });
    let app = Router::new().fallback(handle).with_state(svc.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, svc)
}

#[tokio::main]
async fn main() {
    let quick = std::env::var_os("BREAKER_QUICK").is_some_and(|v| v == "1");
    let (outage_secs, load_secs, tick) = if quick {
        (1, 1, Duration::from_millis(100))
    } else {
        (3, 2, Duration::from_millis(250))
    };
    let started = Instant::now();
    let (inventory_addr, inventory) = serve("inventory", started).await;
    let (pricing_addr, pricing) = serve("pricing", started).await;

    // Retries outside, the breaker inside: it sees every attempt, and its refusal ends the
    // retry loop at once (reqwest-retry treats a middleware error as fatal). The default
    // policy: a `Retry-After` shorter than its 10 s cool-off is still honoured exactly.
    let breakers = CircuitBreakerMiddleware::new();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryTransientMiddleware::new_with_policy(
            ExponentialBackoff::builder()
                .retry_bounds(Duration::from_millis(20), Duration::from_millis(50))
                .build_with_max_retries(2),
        ))
        .with(breakers.clone())
        .build();

    let hosts = [
        ("inventory", inventory_addr, &inventory),
        ("pricing", pricing_addr, &pricing),
    ];
    // Each host's breaker: its name (`reqwest[127.0.0.1:PORT]`), state and time left open.
    let report = || {
        for (name, addr, _) in &hosts {
            let b = breakers.breaker(&addr.to_string());
            let retry_in = b
                .retry_in()
                .map_or("-".to_owned(), |d| format!("{:.2}s", d.as_secs_f64()));
            let state = format!("{:?}", b.state());
            println!(
                "          {name:<9} breaker {:<26} {state:<8} retry_in {retry_in}",
                b.name()
            );
        }
    };

    // One round: ask both services once. Returns the shortest `retry_in` of the refusals, so
    // the loop can come back exactly when a breaker will admit a call again.
    let round = || {
        let client = client.clone();
        let hosts = hosts.map(|(name, addr, _)| (name, addr));
        async move {
            println!("[{:>5.2}s] round", started.elapsed().as_secs_f64());
            let mut soonest: Option<Duration> = None;
            for (name, addr) in hosts {
                let at = started.elapsed().as_secs_f64();
                match client.get(format!("http://{addr}/items")).send().await {
                    Ok(answer) => {
                        println!("  [{at:>5.2}s] {name:<9} client got {}", answer.status())
                    }
                    // Behind reqwest-retry the refusal comes wrapped: `breaker_error` finds it.
                    Err(e) => match breaker_error(&e) {
                        Some(refused) => {
                            println!("  [{at:>5.2}s] {name:<9} client refused locally: {refused}");
                            if let Some(wait) = refused.retry_in() {
                                soonest = Some(soonest.map_or(wait, |s| s.min(wait)));
                            }
                        }
                        None => println!("  [{at:>5.2}s] {name:<9} client error: {e}"),
                    },
                }
            }
            soonest
        }
    };
    // The next round comes after a tick, or sooner when a breaker reopens sooner.
    let pause =
        |soonest: Option<Duration>| tokio::time::sleep(soonest.map_or(tick, |s| s.min(tick)));

    println!("== both services healthy");
    for _ in 0..2 {
        let soonest = round().await;
        pause(soonest).await;
    }
    report();

    // The service answers `status` with `Retry-After: secs` once, then recovers at once; the
    // client does not know, and keeps away as asked. How long until it came back.
    let stay_away = async |svc: &Service, status: u16, secs: u64| -> Duration {
        svc.set(status, Some(secs));
        let mut soonest = round().await;
        let asked_at = svc.last_seen.lock().unwrap().unwrap();
        report();
        svc.set(200, None);
        while svc.last_seen.lock().unwrap().unwrap() == asked_at {
            pause(soonest).await;
            soonest = round().await;
            report();
        }
        svc.last_seen.lock().unwrap().unwrap() - asked_at
    };

    println!("\n== inventory: outage, 503 with Retry-After: {outage_secs}");
    println!("   (the 503 opens the breaker; reqwest-retry's second attempt is refused at once)");
    let away = stay_away(&inventory, 503, outage_secs).await;
    println!(
        "-> inventory asked for {outage_secs}s; the next request reached it {:.2}s later",
        away.as_secs_f64()
    );
    // Back as soon as asked: a tick late at most, never the 10 s cool-off.
    assert!(away >= Duration::from_secs(outage_secs));
    assert!(
        away < Duration::from_secs(outage_secs) + 2 * tick,
        "{away:?}"
    );
    assert_eq!(
        breakers.breaker(&inventory_addr.to_string()).state(),
        State::Closed
    );

    pause(None).await;
    println!("\n== pricing: under load, 429 with Retry-After: {load_secs}");
    let away = stay_away(&pricing, 429, load_secs).await;
    println!(
        "-> pricing asked for {load_secs}s; the next request reached it {:.2}s later",
        away.as_secs_f64()
    );
    assert!(away >= Duration::from_secs(load_secs));
    assert!(away < Duration::from_secs(load_secs) + 2 * tick, "{away:?}");

    println!("\n== done in {:.2}s", started.elapsed().as_secs_f64());
    report();
}
