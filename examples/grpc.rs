//! # grpc: an inventory service over gRPC goes down, and the breaker sees it
//!
//! A checkout calls an inventory service over gRPC (tonic, on 127.0.0.1). tonic sends a gRPC
//! error as an HTTP `200` with its code in `grpc-status`, so a breaker that judges HTTP
//! statuses counts every `UNAVAILABLE` as a success and never opens. `CircuitBreakerLayer::grpc`
//! judges the code instead (from the headers, or from the trailers at the end of the body);
//! so does the plain layer for an `application/grpc` answer, from its headers.
//!
//! The program runs three phases against one real tonic server, with two clients side by
//! side, each sending a call every 5 ms:
//!
//! * **healthy**: the service answers `OK` in 2 ms;
//! * **incident**: it answers `UNAVAILABLE` after 20 ms (a bad deploy);
//! * **recovered**: it answers `OK` again.
//!
//! The clients: **http-judged** (`CircuitBreakerLayer::new(b).classify(breaker::http::classify)`,
//! the HTTP preset by status alone: every answer is a `200`) and **grpc-judged** (`CircuitBreakerLayer::grpc`). Both have `threshold = 5,
//! cool_off = "1s"`. At the end a table shows, per phase and client, the calls made, the calls
//! that reached the server, the refusals the caller got (`UNAVAILABLE` at once, with
//! `grpc-retry-pushback-ms`) and the breaker's state.
//!
//! ```text
//! cargo run --example grpc --features grpc             # ~9 s
//! BREAKER_QUICK=1 cargo run --example grpc --features grpc   # ~3 s smoke run
//! ```
//!
//! Quick mode is a smoke test: it exits non-zero unless the gRPC-judged breaker opened
//! during the incident (and spared the server most calls), the HTTP-judged one did not, and
//! the gRPC-judged one closed again after the recovery.

#[path = "../tests/support/grpc.rs"]
mod backend;

use std::time::Duration;

use breaker::{tower::CircuitBreakerLayer, Breaker, Config, State};
use tonic::Code;
use tower::ServiceBuilder;

/// What one client saw in one phase.
#[derive(Default, Clone, Copy)]
struct Tally {
    calls: u32,
    refused: u32,
    reached: u32,
}

#[tokio::main]
async fn main() {
    let quick = std::env::var("BREAKER_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
        || std::env::args().any(|a| a == "--quick");
    let phase = Duration::from_millis(if quick { 1_000 } else { 3_000 });

    let server = backend::start().await;
    let config = Config::default()
        .threshold(5)
        .cool_off(Duration::from_secs(1));
    let http_judged = Breaker::new("inventory::http_judged", config.clone());
    let grpc_judged = Breaker::new("inventory::grpc_judged", config);
    let channel = server.channel().await;
    let http_client = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(http_judged.clone()).classify(breaker::http::classify))
        .service(channel.clone());
    let grpc_client = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(grpc_judged.clone()))
        .service(channel);

    println!("phase        client          calls  reached  refused  state at end");
    let mut results = Vec::new();
    for (name, down) in [("healthy", false), ("incident", true), ("recovered", false)] {
        server.set_down(down);
        let mut tallies = [Tally::default(); 2];
        let end = tokio::time::Instant::now() + phase;
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        while tokio::time::Instant::now() < end {
            tick.tick().await;
            // The two clients call one after the other, so `hits` tells each one's share.
            let before = server.hits();
            let first = backend::call(http_client.clone(), "work").await;
            let middle = server.hits();
            let second = backend::call(grpc_client.clone(), "work").await;
            let after = server.hits();
            let seen = [(first, middle - before), (second, after - middle)];
            for (tally, (result, reached)) in tallies.iter_mut().zip(seen) {
                tally.calls += 1;
                tally.reached += reached as u32;
                if let Err(status) = result
                    && status.code() == Code::Unavailable
                    && reached == 0
                {
                    tally.refused += 1;
                }
            }
        }
        for (client, tally, breaker) in [
            ("http-judged", tallies[0], &http_judged),
            ("grpc-judged", tallies[1], &grpc_judged),
        ] {
            println!(
                "{name:<12} {client:<14} {:>6} {:>8} {:>8}  {:?}",
                tally.calls,
                tally.reached,
                tally.refused,
                breaker.state()
            );
        }
        results.push((tallies, http_judged.state(), grpc_judged.state()));
    }

    let incident = &results[1];
    println!(
        "\nDuring the incident the HTTP-judged breaker let {} of {} calls reach the failing \
         server and stayed {:?}; the gRPC-judged one let {} of {} through ({} probes and the \
         calls before it opened) and answered the rest with UNAVAILABLE at once.",
        incident.0[0].reached,
        incident.0[0].calls,
        incident.1,
        incident.0[1].reached,
        incident.0[1].calls,
        incident.0[1].reached.saturating_sub(5),
    );

    let spared = incident.0[1].reached * 4 < incident.0[1].calls;
    let ok = incident.1 == State::Closed
        && incident.0[0].refused == 0
        && incident.0[1].refused > 0
        && spared
        && results[2].2 == State::Closed;
    if !ok {
        eprintln!("grpc: the breakers did not behave as this story says");
        std::process::exit(1);
    }
}
