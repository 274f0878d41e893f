//! What the criterion benches share (a module, not a bench target: cargo only takes
//! `benches/*.rs` and `benches/*/main.rs` as targets).

use std::time::Duration;

use criterion::{BenchmarkGroup, Criterion};

pub type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// Whether criterion's command line sets `flag` (e.g. `--measurement-time 0.5`): a group's own
/// setting would override it, so the groups below set a time only when the command line does
/// not (`scripts/wall.sh --quick` relies on it).
pub fn cli_sets(flag: &str) -> bool {
    std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

pub fn group<'a>(c: &'a mut Criterion, name: &str) -> Group<'a> {
    let mut g = c.benchmark_group(name);
    if !cli_sets("--warm-up-time") {
        g.warm_up_time(Duration::from_millis(500));
    }
    if !cli_sets("--measurement-time") {
        g.measurement_time(Duration::from_millis(1500));
    }
    if !cli_sets("--sample-size") {
        g.sample_size(30);
    }
    g
}
