//! The callgrind driver of feature `otel`: `cg_otel <setup> <workload> <n>` runs breaker's
//! workload `n` times (after a warm-up) in a build with `breaker/otel` compiled in, as `cg
//! breaker <workload> <n>` does. `scripts/callgrind_otel.sh` runs it for `n` and `2n` and
//! takes the difference, against `cg breaker` built without the feature.
//!
//! setup: `unused` (compiled in, nothing installed, no subscriber), `meter` (installed on
//! an `SdkMeterProvider` whose periodic reader never collects within a run: the SDK
//! records every call's duration, nothing is exported). workload: `closed_sync`, `open_sync`, `closed_async`, `open_async`.

use std::process::ExitCode;

use breaker_bench::{async_loop, sync_loop, Runtime};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::{
    error::OTelSdkResult,
    metrics::{
        data::ResourceMetrics, exporter::PushMetricExporter, PeriodicReader, SdkMeterProvider,
        Temporality,
    },
};

/// An exporter that sends nothing anywhere: the rows price the recording, not an export.
struct Nowhere;

impl PushMetricExporter for Nowhere {
    async fn export(&self, _: &ResourceMetrics) -> OTelSdkResult {
        Ok(())
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _: std::time::Duration) -> OTelSdkResult {
        Ok(())
    }
    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(setup), Some(workload), Some(n)) = (
        args.get(1),
        args.get(2),
        args.get(3).and_then(|n| n.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: cg_otel <unused|meter> <workload> <n>");
        return ExitCode::from(2);
    };
    // Kept to the end: a provider dropped would shut its instruments down.
    let _provider = match setup.as_str() {
        "unused" => None,
        "meter" => {
            // Collected once an hour: never within a run.
            let reader = PeriodicReader::builder(Nowhere)
                .with_interval(std::time::Duration::from_secs(3600))
                .build();
            let provider = SdkMeterProvider::builder().with_reader(reader).build();
            breaker::otel::install(&provider.meter_with_scope(breaker::otel::scope()));
            Some(provider)
        }
        _ => {
            eprintln!("cg_otel: unknown setup `{setup}`");
            return ExitCode::from(2);
        }
    };
    let b = Runtime::new();
    match workload.as_str() {
        "closed_sync" => sync_loop(n, |x| b.closed_sync(x)),
        "open_sync" => sync_loop(n, |x| b.open_sync(x)),
        "closed_async" => async_loop!(n, |x| b.closed_async(x)),
        "open_async" => async_loop!(n, |x| b.open_async(x)),
        _ => {
            eprintln!("cg_otel: unknown workload `{workload}`");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
