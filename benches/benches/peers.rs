//! `breaker` against failsafe, recloser, tower-circuitbreaker, tower-resilience-circuitbreaker and
//! seatbelt, side by side, in one run:
//!
//! ```text
//! cd benches && cargo bench --bench peers
//! ```
//!
//! Groups: `baselines`, `closed_sync`, `open_sync`, `closed_async`, `open_async`,
//! `scaling_1t`, `scaling_2t`, `scaling_open_1t`, `scaling_open_2t`, `part_four`. `cargo run
//! --release --bin report` turns the estimates into the table of `RESULTS.md`;
//! `scripts/wall.sh` runs this bench (with `keyed` and `tower_layer`) three times and prints
//! the medians over the runs. The workloads themselves are in
//! `src/lib.rs`.

use std::{hint::black_box, time::Duration};

use breaker_bench::{
    async_loop, current_thread, on_threads, on_threads_with, Attr, Baselines, Failsafe, Hedged,
    Recloser, Reconfigured, Retried, Runtime, Seatbelt, Tower, TowerResilience, TowerShared,
};
use common::{cli_sets, group};
use criterion::{criterion_group, criterion_main, Criterion};

mod common;

fn attr() -> Option<Attr> {
    let attr = Attr::new();
    if attr.is_none() {
        eprintln!(
            "note: #[breaker::circuit_breaker] does not wrap functions yet; \
             the `attr` benchmarks are skipped"
        );
    }
    attr
}

fn baselines(c: &mut Criterion) {
    let base = Baselines::new();
    let rt = current_thread();
    let mut g = group(c, "baselines");
    g.bench_function("bare", |b| {
        b.iter(|| black_box(base.bare(black_box(1)).is_ok()))
    });
    g.bench_function("atomic_add", |b| b.iter(|| black_box(base.atomic_add())));
    g.bench_function("clock_read", |b| b.iter(|| black_box(base.clock_read())));
    g.bench_function("clock_std", |b| b.iter(|| black_box(base.clock_std())));
    g.bench_function("clock_coarse", |b| {
        b.iter(|| black_box(base.clock_coarse()))
    });
    g.bench_function("clock_quanta", |b| {
        b.iter(|| black_box(base.clock_quanta()))
    });
    g.bench_function("runtime_flavor", |b| {
        b.iter(|| black_box(base.runtime_flavor()))
    });
    g.bench_function("runtime_flavor_in_runtime", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for _ in 0..n {
                    black_box(base.runtime_flavor());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("clock_coarse_raw", |b| {
        b.iter(|| black_box(base.clock_coarse_raw()))
    });
    g.bench_function("clock_coarse_if_unpausable", |b| {
        b.iter(|| black_box(base.clock_coarse_if_unpausable()))
    });
    g.bench_function("mutex_lock", |b| b.iter(|| black_box(base.mutex_lock())));
    g.bench_function("bare_async", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| base.bare_async(x)))
    });
    g.finish();
}

fn closed_sync(c: &mut Criterion) {
    let (runtime, attr, failsafe, recloser) =
        (Runtime::new(), attr(), Failsafe::new(), Recloser::new());
    let mut tower = Tower::new();
    let mut resilience = TowerResilience::new();
    let seatbelt = Seatbelt::new();
    let mut g = group(c, "closed_sync");
    g.bench_function("breaker", |b| {
        b.iter(|| black_box(runtime.closed_sync(black_box(1)).is_ok()))
    });
    if let Some(attr) = &attr {
        g.bench_function("breaker_attr", |b| {
            b.iter(|| black_box(attr.closed_sync(black_box(1)).is_ok()))
        });
    }
    g.bench_function("failsafe", |b| {
        b.iter(|| black_box(failsafe.closed_sync(black_box(1)).is_ok()))
    });
    g.bench_function("recloser", |b| {
        b.iter(|| black_box(recloser.closed_sync(black_box(1)).is_ok()))
    });
    g.bench_function("tower", |b| {
        b.iter(|| black_box(tower.closed_sync(black_box(1)).is_ok()))
    });
    g.bench_function("tower_resilience", |b| {
        b.iter(|| black_box(resilience.closed_sync(black_box(1)).is_ok()))
    });
    g.bench_function("seatbelt", |b| {
        b.iter(|| black_box(seatbelt.closed_sync(black_box(1)).is_ok()))
    });
    g.finish();
}

fn open_sync(c: &mut Criterion) {
    let (runtime, attr, failsafe, recloser) =
        (Runtime::new(), attr(), Failsafe::new(), Recloser::new());
    let mut tower = Tower::new();
    let mut resilience = TowerResilience::new();
    let seatbelt = Seatbelt::new();
    let mut g = group(c, "open_sync");
    g.bench_function("breaker", |b| {
        b.iter(|| black_box(runtime.open_sync(black_box(1)).is_ok()))
    });
    g.bench_function("breaker_forced", |b| {
        b.iter(|| black_box(runtime.forced_sync(black_box(1)).is_ok()))
    });
    if let Some(attr) = &attr {
        g.bench_function("breaker_attr", |b| {
            b.iter(|| black_box(attr.open_sync(black_box(1)).is_ok()))
        });
        g.bench_function("breaker_attr_typed", |b| {
            b.iter(|| black_box(attr.open_sync_typed(black_box(1)).is_ok()))
        });
    }
    g.bench_function("failsafe", |b| {
        b.iter(|| black_box(failsafe.open_sync(black_box(1)).is_ok()))
    });
    g.bench_function("recloser", |b| {
        b.iter(|| black_box(recloser.open_sync(black_box(1)).is_ok()))
    });
    g.bench_function("tower", |b| {
        b.iter(|| black_box(tower.open_sync(black_box(1)).is_ok()))
    });
    g.bench_function("tower_resilience", |b| {
        b.iter(|| black_box(resilience.open_sync(black_box(1)).is_ok()))
    });
    g.bench_function("seatbelt", |b| {
        b.iter(|| black_box(seatbelt.open_sync(black_box(1)).is_ok()))
    });
    g.finish();
}

fn closed_async(c: &mut Criterion) {
    let (runtime, attr, failsafe, recloser) =
        (Runtime::new(), attr(), Failsafe::new(), Recloser::new());
    let mut tower = Tower::new();
    let mut resilience = TowerResilience::new();
    let seatbelt = Seatbelt::new();
    let base = Baselines::new();
    let rt = current_thread();
    let mut g = group(c, "closed_async");
    g.bench_function("bare_async", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| base.bare_async(x)))
    });
    g.bench_function("breaker", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| runtime.closed_async(x)))
    });
    if let Some(attr) = &attr {
        g.bench_function("breaker_attr", |b| {
            b.iter_custom(|n| async_loop(&rt, n, |x| attr.closed_async(x)))
        });
    }
    g.bench_function("failsafe", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| failsafe.closed_async(x)))
    });
    g.bench_function("recloser", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| recloser.closed_async(x)))
    });
    g.bench_function("tower", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    black_box(tower.closed_async(black_box(i)).await.is_ok());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("tower_resilience", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    black_box(resilience.closed_async(black_box(i)).await.is_ok());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("seatbelt", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| seatbelt.closed_async(x)))
    });
    g.finish();
}

fn open_async(c: &mut Criterion) {
    let (runtime, attr, failsafe, recloser) =
        (Runtime::new(), attr(), Failsafe::new(), Recloser::new());
    let mut tower = Tower::new();
    let mut resilience = TowerResilience::new();
    let seatbelt = Seatbelt::new();
    let rt = current_thread();
    let mut g = group(c, "open_async");
    g.bench_function("breaker", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| runtime.open_async(x)))
    });
    if let Some(attr) = &attr {
        g.bench_function("breaker_attr", |b| {
            b.iter_custom(|n| async_loop(&rt, n, |x| attr.open_async(x)))
        });
        g.bench_function("breaker_attr_typed", |b| {
            b.iter_custom(|n| async_loop(&rt, n, |x| attr.open_async_typed(x)))
        });
    }
    g.bench_function("failsafe", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| failsafe.open_async(x)))
    });
    g.bench_function("recloser", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| recloser.open_async(x)))
    });
    g.bench_function("tower", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    black_box(tower.open_async(black_box(i)).await.is_err());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("tower_resilience", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    black_box(resilience.open_async(black_box(i)).await.is_err());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("seatbelt", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| seatbelt.open_async(x)))
    });
    g.finish();
}

/// The same shared objects hammered by 1 and then by 2 threads; criterion reports
/// per-thread time per call, so `scaling_2t/x ÷ scaling_1t/x` is the per-thread slowdown.
/// tower-resilience's service is `Clone` with a shared circuit: each thread calls its own clone
/// of one service, as its users do (tower-circuitbreaker's is not: threads share it behind a
/// mutex). seatbelt's service is `Sync` (its engine behind an `Arc`): threads share one.
fn scaling(c: &mut Criterion) {
    let base = Baselines::new();
    let (runtime, attr, failsafe, recloser) =
        (Runtime::new(), attr(), Failsafe::new(), Recloser::new());
    let tower = TowerShared::new();
    let resilience = TowerResilience::new();
    let seatbelt = Seatbelt::new();
    for threads in [1usize, 2] {
        let mut g = group(c, &format!("scaling_{threads}t"));
        if !cli_sets("--measurement-time") {
            g.measurement_time(Duration::from_secs(2));
        }
        g.bench_function("bare", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(base.bare(x).is_ok());
                })
            })
        });
        g.bench_function("private_work", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(base.private_work(x).is_ok());
                })
            })
        });
        g.bench_function("atomic_add", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |_| {
                    black_box(base.atomic_add());
                })
            })
        });
        g.bench_function("mutex_lock", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |_| {
                    black_box(base.mutex_lock());
                })
            })
        });
        g.bench_function("breaker", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(runtime.closed_sync(x).is_ok());
                })
            })
        });
        if let Some(attr) = &attr {
            g.bench_function("breaker_attr", |b| {
                b.iter_custom(|n| {
                    on_threads(threads, n, |x| {
                        black_box(attr.closed_sync(x).is_ok());
                    })
                })
            });
        }
        g.bench_function("failsafe", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(failsafe.closed_sync(x).is_ok());
                })
            })
        });
        g.bench_function("recloser", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(recloser.closed_sync(x).is_ok());
                })
            })
        });
        g.bench_function("tower", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(tower.closed_sync(x).is_ok());
                })
            })
        });
        g.bench_function("tower_resilience", |b| {
            b.iter_custom(|n| {
                on_threads_with(
                    threads,
                    n,
                    || resilience.clone(),
                    |mine, x| {
                        black_box(mine.closed_sync_contended(x).is_ok());
                    },
                )
            })
        });
        g.bench_function("seatbelt", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(seatbelt.closed_sync(x).is_ok());
                })
            })
        });
        g.finish();
    }
}

/// Refusals by an open breaker on 1, then 2 threads at once: when a dependency is down every
/// thread is refused, so the refusal must not serialise them either. Left out: the attribute
/// (its `io::Error` allocates per refusal), tower-circuitbreaker (shared behind a mutex) and
/// tower-resilience (its contended open path needs a tokio runtime on the calling thread).
fn scaling_open(c: &mut Criterion) {
    let (runtime, failsafe, recloser) = (Runtime::new(), Failsafe::new(), Recloser::new());
    let seatbelt = Seatbelt::new();
    for threads in [1usize, 2] {
        let mut g = group(c, &format!("scaling_open_{threads}t"));
        g.bench_function("breaker", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(runtime.open_sync(x).is_err());
                })
            })
        });
        g.bench_function("breaker_forced", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(runtime.forced_sync(x).is_err());
                })
            })
        });
        g.bench_function("failsafe", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(failsafe.open_sync(x).is_err());
                })
            })
        });
        g.bench_function("recloser", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(recloser.open_sync(x).is_err());
                })
            })
        });
        g.bench_function("seatbelt", |b| {
            b.iter_custom(|n| {
                on_threads(threads, n, |x| {
                    black_box(seatbelt.open_sync(x).is_err());
                })
            })
        });
        g.finish();
    }
}

/// Part four's features at their own cost: a first attempt through the retry wrapper (and
/// the plain call beside it, in the same group), and a closed call while another thread
/// reconfigures the breaker in a loop (and the same call on a breaker left alone).
fn part_four(c: &mut Criterion) {
    let (runtime, attr, retried) = (Runtime::new(), attr(), Retried::new());
    let rt = current_thread();
    let mut g = group(c, "part_four");
    g.bench_function("closed_async", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| runtime.closed_async(x)))
    });
    g.bench_function("retry_first_attempt", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| retried.first_attempt(x)))
    });
    g.bench_function("retry_unconfigured", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| retried.unconfigured(x)))
    });
    // Issue 43: a hedged call whose first attempt answers before the delay (target: at most
    // +30 ns over `closed_async`).
    let hedged = Hedged::new();
    g.bench_function("hedge_first_answer", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| hedged.first_answer(x)))
    });
    g.bench_function("hedge_unconfigured", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| hedged.unconfigured(x)))
    });
    if let Some(attr) = &attr {
        g.bench_function("attr_closed_async", |b| {
            b.iter_custom(|n| async_loop(&rt, n, |x| attr.closed_async(x)))
        });
        g.bench_function("attr_retry_first_attempt", |b| {
            b.iter_custom(|n| async_loop(&rt, n, |x| retried.attr_first_attempt(x)))
        });
    }
    g.bench_function("closed_sync", |b| {
        b.iter(|| black_box(runtime.closed_sync(black_box(1)).is_ok()))
    });
    let mut reconfigured = Reconfigured::new();
    g.bench_function("closed_sync_reconfigured", |b| {
        b.iter(|| black_box(reconfigured.closed_sync(black_box(1)).is_ok()))
    });
    let times = reconfigured.stop();
    eprintln!("part_four: the breaker was reconfigured {times} times during its rows");
    g.finish();
}

criterion_group!(
    benches,
    baselines,
    closed_sync,
    open_sync,
    closed_async,
    open_async,
    scaling,
    scaling_open,
    part_four
);
criterion_main!(benches);
