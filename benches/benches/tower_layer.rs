//! The tower layer's overhead per request: `breaker::tower::CircuitBreakerLayer` against
//! `tower-resilience-circuitbreaker`'s layer, around the same no-op `service_fn`, in one run:
//!
//! ```text
//! cd benches && cargo bench --bench tower_layer
//! ```
//!
//! Each iteration is one request as a tower client makes it: `ready().await`, then
//! `call(x).await`, on a current-thread runtime (one `block_on` for the whole batch).
//! Rows: `bare` (the service alone), `breaker` and `tower_resilience` closed (default
//! policies, every call a success), `*_open` (forced open: every call refused in `call`'s
//! future), `breaker_http` (an `http::Response` judged by the HTTP preset), and, to show
//! where the layer's time goes, `engine_owned` / `engine_owned_classified` (the runtime's
//! owned call future alone, with a `Breaker` clone per call, no tower around it); with
//! feature `grpc`, `grpc_*`: a gRPC request through `CircuitBreakerLayer::grpc`, the HTTP
//! layer and tower-resilience's, and the service alone.

use std::{
    convert::Infallible,
    future::{ready, Ready},
    hint::black_box,
    io,
    time::{Duration, Instant},
};

use breaker::{tower::CircuitBreakerLayer, Breaker, Config};
use common::group;
use criterion::{criterion_group, criterion_main, Criterion};
use tower::{service_fn, util::ServiceFn, Layer, Service, ServiceExt};
use tower_resilience_circuitbreaker::CircuitBreakerLayer as ResilienceLayer;

mod common;

fn op(x: u64) -> Ready<Result<u64, io::Error>> {
    ready(Ok(x))
}

fn answer(_: u64) -> Ready<Result<http::Response<()>, Infallible>> {
    ready(Ok(http::Response::new(())))
}

type Op = ServiceFn<fn(u64) -> Ready<Result<u64, io::Error>>>;

fn inner() -> Op {
    service_fn(op as fn(u64) -> Ready<Result<u64, io::Error>>)
}

/// `iters` requests through `svc` inside one `block_on`; their total time.
fn requests<S>(rt: &tokio::runtime::Runtime, iters: u64, svc: &mut S) -> Duration
where
    S: Service<u64>,
    S::Error: std::fmt::Debug,
{
    rt.block_on(async {
        let start = Instant::now();
        for i in 0..iters {
            let ready = svc.ready().await.unwrap();
            black_box(ready.call(black_box(i)).await.is_ok());
        }
        start.elapsed()
    })
}

fn tower_layer(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut g = group(c, "tower_layer");

    let mut bare = inner();
    g.bench_function("bare", |b| b.iter_custom(|n| requests(&rt, n, &mut bare)));

    let breaker = Breaker::new("bench::tower", Config::default().threshold(5));
    let mut ours = CircuitBreakerLayer::new(breaker.clone()).layer(inner());
    g.bench_function("breaker", |b| {
        b.iter_custom(|n| requests(&rt, n, &mut ours))
    });

    let mut theirs = ResilienceLayer::builder()
        .build()
        .expect("the default config")
        .layer(inner());
    g.bench_function("tower_resilience", |b| {
        b.iter_custom(|n| requests(&rt, n, &mut theirs))
    });

    // Where the layer's time goes: the engine's owned call alone (one `Breaker` clone per
    // call, as the layer makes), plain and classified, without tower around it.
    g.bench_function("engine_owned", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = Instant::now();
                for i in 0..n {
                    black_box(breaker.clone().call_owned(op(black_box(i))).await.is_ok());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("engine_owned_classified", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = Instant::now();
                for i in 0..n {
                    let call = breaker
                        .clone()
                        .call_owned_classified(breaker::tower::errors_only, op(black_box(i)));
                    black_box(call.await.is_ok());
                }
                start.elapsed()
            })
        })
    });

    let http_breaker = Breaker::new("bench::tower_http", Config::default().threshold(5));
    let mut ours_http = CircuitBreakerLayer::new(http_breaker).layer(service_fn(
        answer as fn(u64) -> Ready<Result<http::Response<()>, Infallible>>,
    ));
    g.bench_function("breaker_http", |b| {
        b.iter_custom(|n| requests(&rt, n, &mut ours_http))
    });

    breaker.handle().force_open();
    g.bench_function("breaker_open", |b| {
        b.iter_custom(|n| requests(&rt, n, &mut ours))
    });

    let (layer, handle) = ResilienceLayer::builder()
        .build_with_handle()
        .expect("the default config");
    let mut theirs_open = layer.layer(inner());
    rt.block_on(handle.force_open());
    g.bench_function("tower_resilience_open", |b| {
        b.iter_custom(|n| requests(&rt, n, &mut theirs_open))
    });
    #[cfg(feature = "grpc")]
    grpc_rows(&mut g, &rt);
    g.finish();
}

/// A gRPC request (`grpc-status: 0` in the answer's headers) through the gRPC layer, the HTTP
/// layer and tower-resilience's, over the same service (`breaker_bench::layers`); feature
/// `grpc` (`cargo bench --bench tower_layer --features grpc`, as `scripts/wall.sh` runs it).
#[cfg(feature = "grpc")]
fn grpc_rows(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
) {
    use breaker_bench::layers::{request, Layers};

    fn run<S: Service<http::Request<()>>>(
        rt: &tokio::runtime::Runtime,
        iters: u64,
        svc: &mut S,
    ) -> Duration {
        rt.block_on(async {
            let start = Instant::now();
            for _ in 0..iters {
                black_box(request(svc).await);
            }
            start.elapsed()
        })
    }
    let mut l = Layers::new();
    g.bench_function("grpc_bare", |b| b.iter_custom(|n| run(rt, n, &mut l.bare)));
    g.bench_function("grpc_breaker", |b| {
        b.iter_custom(|n| run(rt, n, &mut l.grpc))
    });
    g.bench_function("grpc_over_http_layer", |b| {
        b.iter_custom(|n| run(rt, n, &mut l.http))
    });
    g.bench_function("grpc_tower_resilience", |b| {
        b.iter_custom(|n| run(rt, n, &mut l.resilience))
    });
}

criterion_group!(benches, tower_layer);
criterion_main!(benches);
