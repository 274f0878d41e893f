//! Feature `otel` against the real thing: OpenTelemetry's SDK exporting over OTLP/gRPC (its
//! own tonic exporter) to a receiver this test runs on loopback (the collector's services
//! generated in `opentelemetry-proto`), and `tracing` spans exported through
//! `tracing-opentelemetry` to the same receiver. Every test asserts what arrived: the
//! instruments' names, units, attributes and values, the spans and their parents.
//!
//! One SDK and one receiver for the whole binary (the meter is installed once per process,
//! as in a service), on a runtime of their own; the breakers run on each test's paused
//! runtime, and each test reads only its own breakers' series.
#![cfg(feature = "otel")]
// A `GlobalAlloc` cannot be written without `unsafe`; this wrapper only counts (per thread)
// and forwards to the system allocator, and it exists only in this test binary.
#![allow(unsafe_code)]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    collections::BTreeMap,
    future::Future as _,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use breaker::{Breaker, Config, KeyedBreaker};
use opentelemetry::{metrics::MeterProvider as _, trace::TracerProvider as _};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_proto::tonic::{
    collector::{
        metrics::v1::{
            metrics_service_server::{MetricsService, MetricsServiceServer},
            ExportMetricsServiceRequest, ExportMetricsServiceResponse,
        },
        trace::v1::{
            trace_service_server::{TraceService, TraceServiceServer},
            ExportTraceServiceRequest, ExportTraceServiceResponse,
        },
    },
    common::v1::{any_value, KeyValue},
    metrics::v1::{metric::Data, number_data_point, Metric},
    trace::v1::{span::SpanKind, status::StatusCode, Span},
};
use opentelemetry_sdk::{
    metrics::{PeriodicReader, SdkMeterProvider},
    trace::SdkTracerProvider,
};
use tracing_subscriber::layer::SubscriberExt as _;

// --- the counting allocator: allocations made by this thread ---

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// --- the receiver: the collector's two services, keeping every request ---

#[derive(Default)]
struct Received {
    metrics: Mutex<Vec<ExportMetricsServiceRequest>>,
    spans: Mutex<Vec<ExportTraceServiceRequest>>,
}

#[derive(Clone)]
struct Receiver(Arc<Received>);

#[tonic::async_trait]
impl MetricsService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.metrics.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.spans.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// The receiver, the SDK's providers (exporting to it), the meter installed and the
/// subscriber bridging spans: once per binary. The subscriber is the default of the spans
/// test's thread only: the other tests' calls (a hundred thousand keys) would crowd the
/// exporter's batch queue, which drops spans past its size.
struct Fixture {
    received: Arc<Received>,
    meters: SdkMeterProvider,
    tracers: SdkTracerProvider,
    spans: tracing::Dispatch,
    /// The receiver's and the exporters' runtime (the exporters' channels run on it while a
    /// test's thread waits in `force_flush`).
    _runtime: tokio::runtime::Runtime,
}

/// Keys of the keyed breakers that get series of their own (the process's mapping).
fn vip(key: &str) -> Option<&'static str> {
    (key == "vip").then_some("vip")
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    // Made on a thread of its own: a test's runtime cannot block on another one.
    FIXTURE.get_or_init(|| std::thread::spawn(make_fixture).join().unwrap())
}

fn make_fixture() -> Fixture {
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let received = Arc::new(Received::default());
        let receiver = Receiver(received.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(
            tonic::transport::Server::builder()
                .add_service(MetricsServiceServer::new(receiver.clone()))
                .add_service(TraceServiceServer::new(receiver))
                .serve_with_incoming(
                    tonic::codegen::tokio_stream::wrappers::TcpListenerStream::new(listener),
                ),
        );
        let _in_runtime = runtime.enter(); // the exporters' channels are made on it
        let metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .with_endpoint(&endpoint)
            .build()
            .unwrap();
        // Exported when a test flushes (the interval never comes within a test).
        let reader = PeriodicReader::builder(metrics)
            .with_interval(Duration::from_secs(3600))
            .build();
        let meters = SdkMeterProvider::builder().with_reader(reader).build();
        let spans = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(&endpoint)
            .build()
            .unwrap();
        let tracers = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .build();
        // What a service adds: one line for the metrics, the bridge for the spans.
        breaker::otel::install_with(
            &meters.meter_with_scope(breaker::otel::scope()),
            breaker::otel::Options::default().key(vip),
        );
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(tracers.tracer("otel-test")));
        drop(_in_runtime);
        Fixture {
            received,
            meters,
            tracers,
            spans: tracing::Dispatch::new(subscriber),
            _runtime: runtime,
        }
    }
}

// --- reading what arrived ---

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                Some(any_value::Value::IntValue(i)) => i.to_string(),
                Some(any_value::Value::BoolValue(b)) => b.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The metrics of the last export after a flush (cumulative: everything so far), with the
/// scope they came in.
fn flush_metrics() -> Vec<(String, String, Metric)> {
    let f = fixture();
    f.meters.force_flush().unwrap();
    let received = f.received.metrics.lock().unwrap();
    let last = received.last().expect("an export arrived");
    last.resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| {
            let scope = s.scope.clone().unwrap_or_default();
            s.metrics
                .iter()
                .map(move |m| (scope.name.clone(), scope.version.clone(), m.clone()))
        })
        .collect()
}

fn metric<'m>(metrics: &'m [(String, String, Metric)], name: &str) -> &'m Metric {
    let (scope, version, m) = metrics
        .iter()
        .find(|(_, _, m)| m.name == name)
        .unwrap_or_else(|| panic!("no {name} arrived"));
    assert_eq!((scope.as_str(), version.as_str()), ("breaker", "1"));
    m
}

/// A counter's or a gauge's points: attributes → value.
fn points(m: &Metric) -> Vec<(BTreeMap<String, String>, i64)> {
    let points = match m.data.as_ref().unwrap() {
        Data::Sum(sum) => &sum.data_points,
        Data::Gauge(gauge) => &gauge.data_points,
        other => panic!("{} is not a counter or a gauge: {other:?}", m.name),
    };
    points
        .iter()
        .map(|p| {
            let value = match p.value {
                Some(number_data_point::Value::AsInt(n)) => n,
                Some(number_data_point::Value::AsDouble(x)) => x as i64,
                None => panic!("a point without a value"),
            };
            (attributes(&p.attributes), value)
        })
        .collect()
}

/// The value of the point with exactly these attributes.
fn value(m: &Metric, with: &[(&str, &str)]) -> Option<i64> {
    let want = attrs(with);
    points(m)
        .into_iter()
        .find(|(a, _)| *a == want)
        .map(|(_, v)| v)
}

/// The points of one breaker's series.
fn of(m: &Metric, name: &str) -> Vec<(BTreeMap<String, String>, i64)> {
    points(m)
        .into_iter()
        .filter(|(a, _)| a.get("breaker.name").map(String::as_str) == Some(name))
        .collect()
}

/// Every span exported so far.
fn flush_spans() -> Vec<Span> {
    let f = fixture();
    f.tracers.force_flush().unwrap();
    let received = f.received.spans.lock().unwrap();
    received
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| s.spans.clone())
        .collect()
}

fn span_attrs(s: &Span) -> BTreeMap<String, String> {
    attributes(&s.attributes)
}

fn status(s: &Span) -> i32 {
    s.status.as_ref().map_or(0, |st| st.code)
}

#[derive(Debug)]
struct Unavailable;

// --- the tests ---

/// Calls, a slow call, failures that open the breaker, a refusal, a retried call: every
/// instrument of the schema arrives over OTLP with its unit, its attributes and its values.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_schema_arrives_over_otlp() {
    fixture();
    let ms = Duration::from_millis;
    // An hour's cool-off: the collection reads the state on the SDK's side, by the real
    // clock (this runtime's is paused), and must find it still open however long the other
    // tests keep this one waiting.
    let tax = Breaker::new(
        "otel::tax",
        Config::default()
            .threshold(3)
            .cool_off(Duration::from_secs(3600))
            .slow_call(ms(500)),
    );
    for wait in [ms(100), ms(200)] {
        let ok = tax.call(async move {
            tokio::time::sleep(wait).await;
            Ok::<_, Unavailable>(())
        });
        assert!(ok.await.is_ok());
    }
    let slow = tax.call(async {
        tokio::time::sleep(ms(700)).await;
        Ok::<_, Unavailable>(())
    });
    assert!(slow.await.is_ok());
    // The slow call and two failures: three in a row open it.
    for _ in 0..2 {
        let _ = tax.call(async { Err::<(), _>(Unavailable) }).await;
    }
    assert_eq!(tax.state(), breaker::State::Open);
    let refused = tax.call(async { Ok::<_, Unavailable>(()) }).await;
    assert!(matches!(refused, Err(breaker::CallError::Breaker(_))));

    let quotes = Breaker::new(
        "otel::quotes",
        Config::default().threshold(10).retry(3).backoff(ms(10)),
    );
    let mut tries = 0;
    let quote = quotes
        .call_retried(|| {
            tries += 1;
            let attempt = tries;
            async move {
                if attempt < 3 {
                    Err(Unavailable)
                } else {
                    Ok(42)
                }
            }
        })
        .await;
    assert_eq!(quote.unwrap(), 42);

    let metrics = flush_metrics();
    let calls = metric(&metrics, "breaker.calls");
    assert_eq!(calls.unit, "{call}");
    assert!(matches!(&calls.data, Some(Data::Sum(s)) if s.is_monotonic));
    let tax_calls = |outcome: &str, error: Option<&str>| {
        let mut with = vec![("breaker.name", "otel::tax"), ("breaker.outcome", outcome)];
        with.extend(error.map(|e| ("error.type", e)));
        value(calls, &with)
    };
    assert_eq!(tax_calls("success", None), Some(2));
    assert_eq!(tax_calls("slow", Some("slow")), Some(1));
    assert_eq!(tax_calls("failure", Some("_OTHER")), Some(2));
    assert_eq!(tax_calls("rejected", Some("rejected")), Some(1));
    assert_eq!(tax_calls("timeout", Some("timeout")), Some(0));
    assert_eq!(tax_calls("neutral", None), Some(0));
    // Eight outcomes, each once: disjoint, they add up to the calls.
    let tax_points = of(calls, "otel::tax");
    assert_eq!(tax_points.len(), 8);
    assert_eq!(tax_points.iter().map(|(_, v)| v).sum::<i64>(), 6);

    let state = metric(&metrics, "breaker.state");
    assert_eq!(state.unit, "{breaker}");
    assert!(matches!(&state.data, Some(Data::Gauge(_))));
    let tax_state = |s: &str| {
        value(
            state,
            &[("breaker.name", "otel::tax"), ("breaker.state", s)],
        )
    };
    assert_eq!(tax_state("open"), Some(1));
    for s in ["closed", "half_open", "forced_open", "disabled"] {
        assert_eq!(tax_state(s), Some(0), "{s}");
    }

    let transitions = metric(&metrics, "breaker.transitions");
    assert_eq!(transitions.unit, "{transition}");
    assert_eq!(
        value(
            transitions,
            &[
                ("breaker.name", "otel::tax"),
                ("breaker.state.from", "closed"),
                ("breaker.state.to", "open"),
                ("breaker.cause", "consecutive_failures"),
            ]
        ),
        Some(1)
    );

    let retries = metric(&metrics, "breaker.retries");
    assert_eq!(retries.unit, "{retry}");
    let quotes_retries = |r: &str| {
        value(
            retries,
            &[
                ("breaker.name", "otel::quotes"),
                ("breaker.retry.result", r),
            ],
        )
    };
    assert_eq!(quotes_retries("made"), Some(2));
    assert_eq!(quotes_retries("denied"), Some(0));
    // Each attempt is a call.
    let quotes_calls = |o: &str, e: Option<&str>| {
        let mut with = vec![("breaker.name", "otel::quotes"), ("breaker.outcome", o)];
        with.extend(e.map(|e| ("error.type", e)));
        value(calls, &with)
    };
    assert_eq!(quotes_calls("success", None), Some(1));
    assert_eq!(quotes_calls("failure", Some("_OTHER")), Some(2));

    // Durations in seconds, by outcome; a failure's type is its error's.
    let duration = metric(&metrics, "breaker.call.duration");
    assert_eq!(duration.unit, "s");
    let Some(Data::Histogram(h)) = &duration.data else {
        panic!("breaker.call.duration is not a histogram")
    };
    let tax_points: Vec<_> = h
        .data_points
        .iter()
        .filter(|p| attributes(&p.attributes)["breaker.name"] == "otel::tax")
        .map(|p| (attributes(&p.attributes), p.count, p.sum.unwrap_or(0.0)))
        .collect();
    let find = |outcome: &str| {
        tax_points
            .iter()
            .find(|(a, _, _)| a["breaker.outcome"] == outcome)
            .unwrap_or_else(|| panic!("no duration of a {outcome} call: {tax_points:?}"))
    };
    let (success, n, sum) = find("success");
    assert_eq!((success.len(), *n), (2, 2));
    assert!((sum - 0.3).abs() < 1e-6, "{sum}");
    let (slow, n, sum) = find("slow");
    assert_eq!((slow["error.type"].as_str(), *n), ("slow", 1));
    assert!((sum - 0.7).abs() < 1e-6, "{sum}");
    let (failure, n, _) = find("failure");
    assert_eq!(*n, 2);
    assert!(
        failure["error.type"].ends_with("Unavailable"),
        "{failure:?}"
    );
    // A refusal did not reach the dependency: not timed.
    assert!(tax_points
        .iter()
        .all(|(a, _, _)| a["breaker.outcome"] != "rejected"));
    assert_eq!(h.data_points[0].explicit_bounds[0], 0.005);
}

/// A retried call is a `breaker.call` span with its attempts as children; a refusal is an
/// error; a plain call is one span. As `tracing-opentelemetry` exports them over OTLP.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn spans_arrive_over_otlp() {
    let _spans = tracing::dispatcher::set_default(&fixture().spans);
    let ms = Duration::from_millis;
    let quotes = Breaker::new(
        "otel::spans_retried",
        Config::default().threshold(10).retry(3).backoff(ms(10)),
    );
    let mut tries = 0;
    let quote = quotes
        .call_retried(|| {
            tries += 1;
            let attempt = tries;
            async move {
                // The dependency's own span: a child of its attempt's.
                let _client = tracing::info_span!("client.request").entered();
                if attempt < 2 {
                    Err(Unavailable)
                } else {
                    Ok(42)
                }
            }
        })
        .await;
    assert_eq!(quote.unwrap(), 42);

    let plain = Breaker::new("otel::spans_plain", Config::default());
    assert!(plain.call(async { Ok::<_, Unavailable>(()) }).await.is_ok());
    plain.handle().force_open();
    assert!(plain
        .call(async { Ok::<_, Unavailable>(()) })
        .await
        .is_err());

    let spans = flush_spans();
    let named = |name: &str, breaker: &str| -> Vec<&Span> {
        spans
            .iter()
            .filter(|s| {
                s.name == name
                    && span_attrs(s).get("breaker.name").map(String::as_str) == Some(breaker)
            })
            .collect()
    };
    let call = named("breaker.call", "otel::spans_retried");
    assert_eq!(call.len(), 1, "{spans:#?}");
    let call = call[0];
    let a = span_attrs(call);
    assert_eq!(call.kind, SpanKind::Internal as i32);
    assert_eq!(a["breaker.outcome"], "success");
    assert_eq!(a["breaker.attempts"], "2");
    assert_ne!(status(call), StatusCode::Error as i32);
    let mut attempts = named("breaker.attempt", "otel::spans_retried");
    attempts.sort_by_key(|s| span_attrs(s)["breaker.attempt.number"].clone());
    assert_eq!(attempts.len(), 2);
    for attempt in &attempts {
        assert_eq!(attempt.parent_span_id, call.span_id);
        assert_eq!(attempt.trace_id, call.trace_id);
        assert_eq!(attempt.kind, SpanKind::Internal as i32);
    }
    let first = span_attrs(attempts[0]);
    assert_eq!(first["breaker.attempt.kind"], "first");
    assert_eq!(first["breaker.outcome"], "failure");
    assert!(first["error.type"].ends_with("Unavailable"), "{first:?}");
    assert_eq!(status(attempts[0]), StatusCode::Error as i32);
    let retry = span_attrs(attempts[1]);
    assert_eq!(retry["breaker.attempt.kind"], "retry");
    assert_eq!(retry["breaker.outcome"], "success");
    assert!(!retry.contains_key("error.type"));
    // The client's spans are children of their attempts.
    let clients: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "client.request" && s.trace_id == call.trace_id)
        .collect();
    assert_eq!(clients.len(), 2);
    for c in clients {
        assert!(attempts.iter().any(|a| a.span_id == c.parent_span_id));
    }

    let plain = named("breaker.call", "otel::spans_plain");
    assert_eq!(plain.len(), 2);
    let (ok, refused): (Vec<_>, Vec<_>) = plain
        .into_iter()
        .partition(|s| span_attrs(s)["breaker.outcome"] == "success");
    assert_eq!((ok.len(), refused.len()), (1, 1));
    assert!(ok[0].parent_span_id.is_empty());
    let r = span_attrs(refused[0]);
    assert_eq!(r["breaker.outcome"], "rejected");
    assert_eq!(r["error.type"], "breaker.open");
    assert_eq!(status(refused[0]), StatusCode::Error as i32);
}

/// 100 000 keys, one call each: the keyed breaker's series are those of one breaker, plus
/// those of the one key the mapping names.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_keyed_breaker_of_100_000_keys_has_bounded_series() {
    fixture();
    let keyed: KeyedBreaker<String> =
        KeyedBreaker::new("otel::keyed", Config::default().max_keys(200_000));
    for i in 0..100_000 {
        let key = format!("tenant-{i}");
        let _ = keyed
            .call(key.as_str(), async { Ok::<_, Unavailable>(()) })
            .await;
    }
    let _ = keyed.call("vip", async { Err::<(), _>(Unavailable) }).await;

    let metrics = flush_metrics();
    let calls = of(metric(&metrics, "breaker.calls"), "otel::keyed");
    // Eight outcomes for the keys summed, eight for the named key.
    assert_eq!(calls.len(), 16, "{calls:?}");
    let sum = |key: Option<&str>| -> i64 {
        calls
            .iter()
            .filter(|(a, _)| a.get("breaker.key").map(String::as_str) == key)
            .map(|(_, v)| v)
            .sum()
    };
    assert_eq!((sum(None), sum(Some("vip"))), (100_000, 1));
    let states = of(metric(&metrics, "breaker.state"), "otel::keyed");
    assert_eq!(states.len(), 10);
    assert_eq!(
        states
            .iter()
            .find(|(a, _)| a["breaker.state"] == "closed" && !a.contains_key("breaker.key"))
            .map(|(_, v)| *v),
        Some(100_000)
    );
    let duration = metric(&metrics, "breaker.call.duration");
    let Some(Data::Histogram(h)) = &duration.data else {
        panic!()
    };
    let keyed_points = h
        .data_points
        .iter()
        .filter(|p| attributes(&p.attributes)["breaker.name"] == "otel::keyed")
        .count();
    // Successes summed, the named key's failure.
    assert_eq!(keyed_points, 2);
}

/// With the meter installed, a call allocates nothing for it: its duration is recorded with
/// attributes bound once (counted on this thread, which runs every call; no subscriber
/// wants spans here). A retried and a hedged call neither.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_allocates_nothing_for_the_metrics() {
    fixture();
    let _no_spans = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::new());
    let b = Breaker::new("otel::allocations", Config::default());
    let call = || b.call(async { Ok::<_, Unavailable>(()) });
    let fail = || b.call(async { Err::<(), _>(Unavailable) });
    // The first of each binds its attributes and makes its series.
    assert!(call().await.is_ok());
    assert!(fail().await.is_err());
    let before = allocations();
    for _ in 0..1_000 {
        assert!(call().await.is_ok());
    }
    assert!(fail().await.is_err());
    assert_eq!(allocations() - before, 0);
    b.handle().reset();

    // A retried call and a hedged call whose first attempt answers at once: nothing either
    // (no span is wanted, so no call span is made for their attempts).
    let ms = Duration::from_millis;
    let retried = Breaker::new(
        "otel::allocations_retried",
        Config::default().retry(3).backoff(ms(10)),
    );
    let hedged = Breaker::new(
        "otel::allocations_hedged",
        Config::default()
            .hedge(1)
            .hedge_delay(breaker::HedgeDelay::Fixed(ms(20))),
    );
    let both = || async {
        let r = retried.call_retried(|| async { Ok::<_, Unavailable>(()) });
        assert!(r.await.is_ok());
        let h = hedged.call_hedged(|| async { Ok::<_, Unavailable>(()) });
        assert!(h.await.is_ok());
    };
    both().await;
    let before = allocations();
    for _ in 0..100 {
        both().await;
    }
    assert_eq!(allocations() - before, 0);

    // And the durations were recorded.
    let metrics = flush_metrics();
    let duration = metric(&metrics, "breaker.call.duration");
    let Some(Data::Histogram(h)) = &duration.data else {
        panic!()
    };
    let count: u64 = h
        .data_points
        .iter()
        .filter(|p| attributes(&p.attributes)["breaker.name"] == "otel::allocations")
        .map(|p| p.count)
        .sum();
    assert_eq!(count, 1_003);
}

/// A stream judged at its headers (the gRPC layer's `answer_began`): a healthy 400 ms stream
/// under `slow_call = 200ms` is a success in the schema too, as the breaker judges it; one
/// whose headers came after 250 ms is slow.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_stream_is_judged_slow_at_its_headers() {
    fixture();
    let ms = Duration::from_millis;
    let b = Breaker::new(
        "otel::stream",
        Config::default().threshold(100).slow_call(ms(200)),
    );
    let stream = |headers: Duration, end: Duration| async move {
        tokio::time::sleep(headers).await;
        tokio::time::sleep(end).await;
        Ok::<(), Unavailable>(())
    };
    for (headers, end) in [(ms(10), ms(390)), (ms(250), ms(150))] {
        let mut call = std::pin::pin!(b.call(stream(headers, end)));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(call.as_mut().poll(&mut cx).is_pending());
        tokio::time::advance(headers).await;
        assert!(call.as_mut().poll(&mut cx).is_pending());
        call.as_mut().answer_began();
        assert!(call.await.is_ok());
    }
    let stats = b.stats();
    assert_eq!((stats.successes, stats.slow_calls), (1, 1));

    let metrics = flush_metrics();
    let duration = metric(&metrics, "breaker.call.duration");
    let Some(Data::Histogram(h)) = &duration.data else {
        panic!()
    };
    let mut outcomes: Vec<_> = h
        .data_points
        .iter()
        .map(|p| (attributes(&p.attributes), p.count, p.sum.unwrap_or(0.0)))
        .filter(|(a, _, _)| a["breaker.name"] == "otel::stream")
        .map(|(a, n, sum)| (a["breaker.outcome"].clone(), n, (sum * 1000.0).round()))
        .collect();
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    // Timed to the end of the stream, judged at its headers.
    assert_eq!(
        outcomes,
        [
            ("slow".to_owned(), 1, 400.0),
            ("success".to_owned(), 1, 400.0)
        ]
    );
}

/// A hedged call that the hedge wins, and an outlier ejected from a keyed breaker: the
/// schema's `breaker.hedges` (by result) and `breaker.ejections` arrive over OTLP.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn hedges_and_ejections_arrive_over_otlp() {
    fixture();
    let ms = Duration::from_millis;
    let prices = Breaker::new(
        "otel::prices",
        Config::default()
            .hedge(1)
            .hedge_delay(breaker::HedgeDelay::Fixed(ms(20))),
    );
    let made = std::sync::atomic::AtomicU32::new(0);
    let price = prices
        .call_hedged(|| {
            let slow = made.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            async move {
                tokio::time::sleep(if slow { ms(500) } else { ms(5) }).await;
                Ok::<_, Unavailable>(7)
            }
        })
        .await;
    assert_eq!(price.unwrap(), 7);
    assert_eq!((prices.stats().hedges, prices.stats().hedges_won), (1, 1));

    // Ten endpoints, one failing every other call: below the peers' mean − 1.9 σ. Few calls
    // (the spans of a thousand would crowd the exporter's queue the other tests share).
    let endpoints = KeyedBreaker::<String>::new(
        "otel::endpoints",
        Config::default().outliers(
            breaker::Outliers::default()
                .interval(Duration::from_secs(1))
                .request_volume(10),
        ),
    );
    tokio::time::sleep(ms(500)).await;
    for _ in 0..3 {
        for e in 0..10 {
            for i in 0..10 {
                let failed = e == 3 && i % 2 == 0;
                let _ = endpoints.call_sync(&format!("10.0.0.{e}"), || {
                    if failed {
                        Err("502")
                    } else {
                        Ok(())
                    }
                });
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        endpoints.breaker("10.0.0.3").state(),
        breaker::State::Open,
        "the outlier is ejected"
    );

    let metrics = flush_metrics();
    let hedges = metric(&metrics, "breaker.hedges");
    assert_eq!(hedges.unit, "{hedge}");
    let result = |r: &str| {
        value(
            hedges,
            &[
                ("breaker.name", "otel::prices"),
                ("breaker.hedge.result", r),
            ],
        )
    };
    assert_eq!(
        (result("sent"), result("won"), result("denied")),
        (Some(1), Some(1), Some(0))
    );
    let ejections = metric(&metrics, "breaker.ejections");
    assert_eq!(ejections.unit, "{ejection}");
    assert_eq!(
        value(ejections, &[("breaker.name", "otel::endpoints")]),
        Some(1)
    );
    let transitions = metric(&metrics, "breaker.transitions");
    assert_eq!(
        value(
            transitions,
            &[
                ("breaker.name", "otel::endpoints"),
                ("breaker.state.from", "closed"),
                ("breaker.state.to", "open"),
                ("breaker.cause", "outlier"),
            ]
        ),
        Some(1)
    );
}

/// The spans of one breaker, by name.
fn spans_of<'s>(spans: &'s [Span], name: &str, breaker: &str) -> Vec<&'s Span> {
    spans
        .iter()
        .filter(|s| {
            s.name == name && span_attrs(s).get("breaker.name").map(String::as_str) == Some(breaker)
        })
        .collect()
}

/// A hedged call is a `breaker.call` span with its attempts as children: the first (kind
/// `first`), dropped when the hedge won, ends as its drop makes it (abandoned: past
/// `slow_call`); the hedge (kind `hedge`) answered, and the call with it. A hedged call whose
/// attempts all fail ends with its first attempt's failure, the answer it returns.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_call_is_a_span_with_its_first_and_hedge_attempts() {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    use tracing::Instrument as _;
    let _spans = tracing::dispatcher::set_default(&fixture().spans);
    let ms = Duration::from_millis;
    let config = Config::default()
        .threshold(10)
        .slow_call(ms(10))
        .hedge(1)
        .hedge_delay(breaker::HedgeDelay::Fixed(ms(20)));
    let prices = Breaker::new("otel::spans_hedged", config.clone());
    let made = AtomicU32::new(0);
    let price = prices
        .call_hedged(|| {
            let n = made.fetch_add(1, SeqCst);
            async move {
                // The dependency's span, made as its attempt is polled: the attempt's child.
                let client = tracing::info_span!("client.request", n);
                let took = if n == 0 { ms(500) } else { ms(5) };
                tokio::time::sleep(took).instrument(client).await;
                Ok::<_, Unavailable>(n)
            }
        })
        .await;
    assert_eq!(price.unwrap(), 1, "the hedge won");

    let failing = Breaker::new("otel::spans_hedged_failing", config);
    let failed = failing
        .call_hedged(|| async { Err::<(), _>(Unavailable) })
        .await;
    assert!(failed.is_err());
    assert_eq!(
        failing.stats().hedges,
        1,
        "a failure sends the hedge at once"
    );

    let spans = flush_spans();
    let call = spans_of(&spans, "breaker.call", "otel::spans_hedged");
    assert_eq!(call.len(), 1, "{spans:#?}");
    let call = call[0];
    let a = span_attrs(call);
    assert_eq!(call.kind, SpanKind::Internal as i32);
    assert_eq!(a["breaker.outcome"], "success");
    assert_eq!(a["breaker.attempts"], "2");
    assert!(!a.contains_key("error.type"));
    assert_ne!(status(call), StatusCode::Error as i32);
    let mut attempts = spans_of(&spans, "breaker.attempt", "otel::spans_hedged");
    attempts.sort_by_key(|s| span_attrs(s)["breaker.attempt.number"].clone());
    assert_eq!(attempts.len(), 2);
    for attempt in &attempts {
        assert_eq!(attempt.parent_span_id, call.span_id);
        assert_eq!(attempt.trace_id, call.trace_id);
    }
    let first = span_attrs(attempts[0]);
    assert_eq!(
        (
            first["breaker.attempt.kind"].as_str(),
            first["breaker.attempt.number"].as_str()
        ),
        ("first", "1")
    );
    assert_eq!(first["breaker.outcome"], "abandoned");
    assert_eq!(first["error.type"], "abandoned");
    assert_eq!(status(attempts[0]), StatusCode::Error as i32);
    let hedge = span_attrs(attempts[1]);
    assert_eq!(
        (
            hedge["breaker.attempt.kind"].as_str(),
            hedge["breaker.attempt.number"].as_str()
        ),
        ("hedge", "2")
    );
    assert_eq!(hedge["breaker.outcome"], "success");
    assert_ne!(status(attempts[1]), StatusCode::Error as i32);
    // The first attempt began at 0 and was dropped at 25 ms, when the hedge (sent at 20 ms)
    // answered: its span is the longer.
    let took = |s: &Span| s.end_time_unix_nano - s.start_time_unix_nano;
    assert!(took(attempts[0]) > took(attempts[1]));
    let clients: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "client.request" && s.trace_id == call.trace_id)
        .collect();
    assert_eq!(clients.len(), 2);
    for c in clients {
        assert!(attempts.iter().any(|a| a.span_id == c.parent_span_id));
    }

    let call = spans_of(&spans, "breaker.call", "otel::spans_hedged_failing");
    assert_eq!(call.len(), 1);
    let a = span_attrs(call[0]);
    assert_eq!(
        (
            a["breaker.outcome"].as_str(),
            a["breaker.attempts"].as_str()
        ),
        ("failure", "2")
    );
    assert!(a["error.type"].ends_with("Unavailable"), "{a:?}");
    assert_eq!(status(call[0]), StatusCode::Error as i32);
    let mut kinds: Vec<_> = spans_of(&spans, "breaker.attempt", "otel::spans_hedged_failing")
        .into_iter()
        .map(|s| {
            assert_eq!(s.parent_span_id, call[0].span_id);
            let a = span_attrs(s);
            (
                a["breaker.attempt.kind"].clone(),
                a["breaker.outcome"].clone(),
            )
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("first".to_owned(), "failure".to_owned()),
            ("hedge".to_owned(), "failure".to_owned())
        ]
    );
}

/// The breaker's own probe has no caller: each run is a root `breaker.attempt` of kind
/// `probe`, the probe's own spans its children; a probe that panics ends as a panic, the
/// next one's success as a success.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn each_probe_run_is_a_root_attempt_span() {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    let _spans = tracing::dispatcher::set_default(&fixture().spans);
    let runs = Arc::new(AtomicU32::new(0));
    let counted = runs.clone();
    let b = Breaker::new(
        "otel::spans_probe",
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(5))
            .max_cool_off(Duration::from_secs(60))
            .probe(move || {
                let first = counted.fetch_add(1, SeqCst) == 0;
                async move {
                    drop(tracing::info_span!("client.health").entered());
                    if first {
                        panic!("the probe's own bug (this panic is the test's)");
                    }
                    Ok::<(), Unavailable>(())
                }
            }),
    );
    let _ = b.call(async { Err::<(), _>(Unavailable) }).await;
    assert_eq!(b.state(), breaker::State::Open);
    // Probed at 5 s (it panics: reopened for 10 s), again at 15 s (it closes the breaker).
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(runs.load(SeqCst), 2);
    assert_eq!(b.state(), breaker::State::Closed);

    let spans = flush_spans();
    let mut probes = spans_of(&spans, "breaker.attempt", "otel::spans_probe");
    probes.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(probes.len(), 2, "{spans:#?}");
    for p in &probes {
        assert!(p.parent_span_id.is_empty(), "a root span: {p:?}");
        assert_eq!(p.kind, SpanKind::Internal as i32);
        assert_eq!(span_attrs(p)["breaker.attempt.kind"], "probe");
        let children = spans
            .iter()
            .filter(|s| s.name == "client.health" && s.parent_span_id == p.span_id)
            .count();
        assert_eq!(children, 1);
    }
    let panicked = span_attrs(probes[0]);
    assert_eq!(
        (
            panicked["breaker.outcome"].as_str(),
            panicked["error.type"].as_str()
        ),
        ("failure", "panic")
    );
    assert_eq!(status(probes[0]), StatusCode::Error as i32);
    let healthy = span_attrs(probes[1]);
    assert_eq!(healthy["breaker.outcome"], "success");
    assert!(!healthy.contains_key("error.type"));
    assert_ne!(status(probes[1]), StatusCode::Error as i32);
}

/// The dependency's client, panicking.
fn panics() -> Result<(), Unavailable> {
    panic!("the dependency's client panicked (this panic is the test's)")
}

/// A call whose future panics is a failure on its span (`error.type = "panic"`, an error
/// status), once the panic is caught and the call future dropped; so are a retried and a
/// hedged call whose attempt panics, and the attempt.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_whose_future_panics_ends_its_span_as_a_panic() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let _spans = tracing::dispatcher::set_default(&fixture().spans);
    fn poll_panics<F: std::future::Future>(future: F) {
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let polled = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
        assert!(polled.is_err(), "the panic went through the call");
    }
    let plain = Breaker::new("otel::spans_panic", Config::default().threshold(10));
    poll_panics(plain.call(async { panics() }));
    assert_eq!(plain.stats().failures, 1);
    let retried = Breaker::new(
        "otel::spans_panic_retried",
        Config::default().threshold(10).retry(3),
    );
    poll_panics(retried.call_retried(|| async { panics() }));
    let hedged = Breaker::new(
        "otel::spans_panic_hedged",
        Config::default().threshold(10).hedge(1),
    );
    poll_panics(hedged.call_hedged(|| async { panics() }));

    let spans = flush_spans();
    let is_panic = |s: &Span| {
        let a = span_attrs(s);
        assert_eq!(
            (a["breaker.outcome"].as_str(), a["error.type"].as_str()),
            ("failure", "panic"),
            "{s:?}"
        );
        assert_eq!(status(s), StatusCode::Error as i32);
    };
    for breaker in [
        "otel::spans_panic",
        "otel::spans_panic_retried",
        "otel::spans_panic_hedged",
    ] {
        let call = spans_of(&spans, "breaker.call", breaker);
        assert_eq!(call.len(), 1, "{breaker}: {spans:#?}");
        is_panic(call[0]);
        let attempts = spans_of(&spans, "breaker.attempt", breaker);
        if breaker == "otel::spans_panic" {
            assert!(attempts.is_empty());
        } else {
            assert_eq!(attempts.len(), 1, "{breaker}");
            assert_eq!(attempts[0].parent_span_id, call[0].span_id);
            assert_eq!(span_attrs(attempts[0])["breaker.attempt.kind"], "first");
            is_panic(attempts[0]);
            assert_eq!(span_attrs(call[0])["breaker.attempts"], "1");
        }
    }
}

/// The outcomes the schema test does not make: a timeout, a neutral error, a call dropped
/// before `slow_call` (cancelled) and one dropped after it (abandoned), each counted in
/// `breaker.calls` with its `error.type` and timed in `breaker.call.duration`.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_outcome_arrives_with_its_value() {
    fixture();
    let ms = Duration::from_millis;
    let b = Breaker::new(
        "otel::outcomes",
        Config::default()
            .threshold(100)
            .timeout(ms(300))
            .slow_call(ms(200)),
    );
    let timed_out = b
        .call(async {
            tokio::time::sleep(ms(400)).await;
            Ok::<_, Unavailable>(())
        })
        .await;
    assert!(matches!(timed_out, Err(breaker::CallError::Breaker(ref e)) if e.is_timeout()));
    let neutral = b
        .call_with(|_: &Unavailable| false, async { Err::<(), _>(Unavailable) })
        .await;
    assert!(neutral.is_err());
    for dropped_after in [ms(50), ms(250)] {
        let mut call = std::pin::pin!(b.call(async {
            tokio::time::sleep(ms(1000)).await;
            Ok::<_, Unavailable>(())
        }));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(call.as_mut().poll(&mut cx).is_pending());
        tokio::time::advance(dropped_after).await;
    }

    let metrics = flush_metrics();
    let calls = metric(&metrics, "breaker.calls");
    let count = |outcome: &str, error: Option<&str>| {
        let mut with = vec![
            ("breaker.name", "otel::outcomes"),
            ("breaker.outcome", outcome),
        ];
        with.extend(error.map(|e| ("error.type", e)));
        value(calls, &with)
    };
    assert_eq!(count("timeout", Some("timeout")), Some(1));
    assert_eq!(count("neutral", None), Some(1));
    assert_eq!(count("cancelled", None), Some(1));
    assert_eq!(count("abandoned", Some("abandoned")), Some(1));
    assert_eq!(
        of(calls, "otel::outcomes")
            .iter()
            .map(|(_, v)| v)
            .sum::<i64>(),
        4
    );

    let duration = metric(&metrics, "breaker.call.duration");
    let Some(Data::Histogram(h)) = &duration.data else {
        panic!("breaker.call.duration is not a histogram")
    };
    let mut timed: Vec<_> = h
        .data_points
        .iter()
        .map(|p| (attributes(&p.attributes), p.count, p.sum.unwrap_or(0.0)))
        .filter(|(a, _, _)| a["breaker.name"] == "otel::outcomes")
        .map(|(a, n, sum)| {
            let error = a.get("error.type").cloned().unwrap_or_default();
            (
                a["breaker.outcome"].clone(),
                error,
                n,
                (sum * 1000.0).round() as u64,
            )
        })
        .collect();
    timed.sort();
    let row = |o: &str, e: &str, ms: u64| (o.to_owned(), e.to_owned(), 1, ms);
    assert_eq!(
        timed,
        [
            row("abandoned", "abandoned", 250),
            row("cancelled", "", 50),
            row("neutral", "", 0),
            row("timeout", "timeout", 300),
        ]
    );
}

/// A keyed hedged call over replicas whose first key is open: its `breaker.call` carries the
/// first key's name; the refused attempt (`rejected`), the first attempt made again on the
/// next key (dropped: `cancelled`) and the hedge to the third key (`success`) are its
/// children, numbered as made, each with its own key's name.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_keyed_hedged_call_names_each_attempt_by_its_key() {
    use tracing::Instrument as _;
    let _spans = tracing::dispatcher::set_default(&fixture().spans);
    let ms = Duration::from_millis;
    let replicas = KeyedBreaker::<String>::new(
        "otel::spans_replicas",
        Config::default()
            .threshold(1)
            .hedge(1)
            .hedge_delay(breaker::HedgeDelay::Fixed(ms(10))),
    );
    let _ = replicas.call_sync("a", || Err::<(), _>(Unavailable));
    let keys = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
    let answer = replicas
        .call_hedged(&keys, |replica: &String| {
            let replica = replica.clone();
            async move {
                let took = if replica == "b" { ms(500) } else { ms(5) };
                tokio::time::sleep(took)
                    .instrument(tracing::info_span!("client.request"))
                    .await;
                Ok::<_, Unavailable>(replica)
            }
        })
        .await;
    assert_eq!(answer.unwrap(), "c");

    let spans = flush_spans();
    // The sync call that opened `a` has no span.
    let call = spans_of(&spans, "breaker.call", "otel::spans_replicas[a]");
    assert_eq!(call.len(), 1, "{spans:#?}");
    let a = span_attrs(call[0]);
    assert_eq!(
        (
            a["breaker.outcome"].as_str(),
            a["breaker.attempts"].as_str()
        ),
        ("success", "3")
    );
    let mut attempts: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "breaker.attempt" && s.parent_span_id == call[0].span_id)
        .map(|s| {
            let a = span_attrs(s);
            [
                "breaker.attempt.number",
                "breaker.attempt.kind",
                "breaker.name",
                "breaker.outcome",
            ]
            .map(|k| a[k].clone())
        })
        .collect();
    attempts.sort();
    assert_eq!(
        attempts,
        [
            ["1", "first", "otel::spans_replicas[a]", "rejected"],
            ["2", "first", "otel::spans_replicas[b]", "cancelled"],
            ["3", "hedge", "otel::spans_replicas[c]", "success"],
        ]
        .map(|row| row.map(str::to_owned))
    );
}

/// One breaker's `breaker.calls` by outcome (those with a count), and its state in force,
/// as the last export says after a flush.
fn series_of(name: &str) -> (BTreeMap<String, i64>, Vec<String>) {
    let metrics = flush_metrics();
    let calls = of(metric(&metrics, "breaker.calls"), name)
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(a, v)| (a["breaker.outcome"].clone(), v))
        .collect();
    let states = metrics
        .iter()
        .filter(|(_, _, m)| m.name == "breaker.state")
        .flat_map(|(_, _, m)| of(m, name))
        .filter(|(_, v)| *v > 0)
        .map(|(a, _)| a["breaker.state"].clone())
        .collect();
    (calls, states)
}

fn outcomes(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(o, n)| (o.to_string(), *n)).collect()
}

/// A reset clears the breaker's statistics, not its series: the counters stay where they
/// were and go on from there, and the state gauge follows the reset (open, then closed).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_reset_moves_no_counter_back() {
    fixture();
    let name = "otel::reset";
    let b = Breaker::new(
        name,
        Config::default()
            .threshold(2)
            .cool_off(Duration::from_secs(3600)),
    );
    for _ in 0..3 {
        assert!(b.call(async { Ok::<_, Unavailable>(()) }).await.is_ok());
    }
    for _ in 0..2 {
        assert!(b.call(async { Err::<(), _>(Unavailable) }).await.is_err());
    }
    let before = outcomes(&[("success", 3), ("failure", 2)]);
    assert_eq!(series_of(name), (before.clone(), vec!["open".into()]));
    b.handle().reset();
    assert_eq!(b.stats().calls, 0, "the statistics were cleared");
    assert_eq!(series_of(name), (before, vec!["closed".into()]));
    assert!(b.call(async { Ok::<_, Unavailable>(()) }).await.is_ok());
    let after = outcomes(&[("success", 4), ("failure", 2)]);
    assert_eq!(series_of(name), (after, vec!["closed".into()]));
    let metrics = flush_metrics();
    let transitions = metric(&metrics, "breaker.transitions");
    let reset = [
        ("breaker.name", name),
        ("breaker.state.from", "open"),
        ("breaker.state.to", "closed"),
        ("breaker.cause", "manual"),
    ];
    assert_eq!(value(transitions, &reset), Some(1));

    // A reset followed, before the next collection, by more calls of every outcome than
    // before it: the series still keep what came before the reset (they read the counts
    // across resets, `Handle::counted`; a collector that looked for a count going down lost
    // them: success 5 read as 3).
    let hidden = "otel::reset_hidden";
    let b = Breaker::new(hidden, Config::default());
    for _ in 0..2 {
        assert!(b.call(async { Ok::<_, Unavailable>(()) }).await.is_ok());
    }
    assert_eq!(series_of(hidden).0, outcomes(&[("success", 2)]));
    b.handle().reset();
    for _ in 0..3 {
        assert!(b.call(async { Ok::<_, Unavailable>(()) }).await.is_ok());
    }
    assert_eq!(series_of(hidden).0, outcomes(&[("success", 5)]));
}

/// A breaker reconfigured with the meter installed keeps its series (the same name, the
/// counts so far) and is counted by its new rules: a `slow_call` set since makes a slow
/// call, a threshold lowered since opens it at the next failure.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_reconfigured_breaker_keeps_its_series_and_counts_by_the_new_rules() {
    fixture();
    let ms = Duration::from_millis;
    let name = "otel::reconfigured";
    let b = Breaker::new(
        name,
        Config::default()
            .threshold(5)
            .cool_off(Duration::from_secs(3600)),
    );
    let slowly = || {
        b.call(async {
            tokio::time::sleep(ms(150)).await;
            Ok::<_, Unavailable>(())
        })
    };
    assert!(slowly().await.is_ok());
    assert!(b.call(async { Err::<(), _>(Unavailable) }).await.is_err());
    let before = outcomes(&[("success", 1), ("failure", 1)]);
    assert_eq!(series_of(name), (before, vec!["closed".into()]));
    b.reconfigure(
        Config::default()
            .threshold(3)
            .slow_call(ms(100))
            .cool_off(Duration::from_secs(3600)),
    )
    .unwrap();
    assert!(slowly().await.is_ok());
    assert!(b.call(async { Err::<(), _>(Unavailable) }).await.is_err());
    // The failure before, the slow call and this one: three in a row under the new rules.
    assert_eq!(b.state(), breaker::State::Open);
    let after = outcomes(&[("success", 1), ("failure", 2), ("slow", 1)]);
    assert_eq!(series_of(name), (after, vec!["open".into()]));
    let metrics = flush_metrics();
    let Some(Data::Histogram(h)) = &metric(&metrics, "breaker.call.duration").data else {
        panic!("breaker.call.duration is not a histogram")
    };
    let slow: Vec<_> = h
        .data_points
        .iter()
        .map(|p| (attributes(&p.attributes), p.count))
        .filter(|(a, _)| a["breaker.name"] == name && a["breaker.outcome"] == "slow")
        .collect();
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!((slow[0].0["error.type"].as_str(), slow[0].1), ("slow", 1));
}

/// A dropped breaker's counts stay in its series (cumulative counters never go back), its
/// state gauge is no longer reported, and a breaker made again with its name counts on from
/// where the series was.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_dropped_breakers_counts_stay_in_its_series() {
    fixture();
    let name = "otel::dropped";
    let b = Breaker::new(name, Config::default().threshold(10));
    for _ in 0..2 {
        assert!(b.call(async { Ok::<_, Unavailable>(()) }).await.is_ok());
    }
    assert!(b.call(async { Err::<(), _>(Unavailable) }).await.is_err());
    let counted = outcomes(&[("success", 2), ("failure", 1)]);
    assert_eq!(series_of(name), (counted.clone(), vec!["closed".into()]));
    drop(b);
    assert!(breaker::registry().get(name).is_none(), "the breaker went");
    assert_eq!(series_of(name), (counted, vec![]));
    let again = Breaker::new(name, Config::default().threshold(10));
    assert!(again.call(async { Ok::<_, Unavailable>(()) }).await.is_ok());
    let on = outcomes(&[("success", 3), ("failure", 1)]);
    assert_eq!(series_of(name), (on, vec!["closed".into()]));
}

/// A call whose future panics is a failure in the series: `breaker.calls` counts it
/// `failure`, and enough of them open the breaker (`breaker.state`, `breaker.transitions`);
/// as the module says, it is not timed (`breaker.call.duration` has the success only).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_panicking_call_is_a_failure_in_the_series() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    fixture();
    let name = "otel::panic_series";
    let b = Breaker::new(
        name,
        Config::default()
            .threshold(2)
            .cool_off(Duration::from_secs(3600)),
    );
    assert!(b.call(async { Ok::<_, Unavailable>(()) }).await.is_ok());
    for _ in 0..2 {
        let mut call = std::pin::pin!(b.call(async { panics() }));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let polled = catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(&mut cx)));
        assert!(polled.is_err(), "the panic went through the call");
    }
    assert_eq!(b.state(), breaker::State::Open);
    let counted = outcomes(&[("success", 1), ("failure", 2)]);
    assert_eq!(series_of(name), (counted, vec!["open".into()]));
    let metrics = flush_metrics();
    let opened = [
        ("breaker.name", name),
        ("breaker.state.from", "closed"),
        ("breaker.state.to", "open"),
        ("breaker.cause", "consecutive_failures"),
    ];
    assert_eq!(
        value(metric(&metrics, "breaker.transitions"), &opened),
        Some(1)
    );
    let Some(Data::Histogram(h)) = &metric(&metrics, "breaker.call.duration").data else {
        panic!("breaker.call.duration is not a histogram")
    };
    let mut timed: Vec<_> = h
        .data_points
        .iter()
        .map(|p| (attributes(&p.attributes), p.count))
        .filter(|(a, _)| a["breaker.name"] == name)
        .map(|(a, n)| {
            let error = a.get("error.type").cloned().unwrap_or_default();
            (a["breaker.outcome"].clone(), error, n)
        })
        .collect();
    timed.sort();
    let row = |o: &str, e: &str, n: u64| (o.to_owned(), e.to_owned(), n);
    assert_eq!(timed, [row("success", "", 1)]);
}
