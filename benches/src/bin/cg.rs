//! The callgrind driver: `cg <impl> <workload> <n>` sets up one implementation, warms it up,
//! then runs one workload `n` times. `scripts/callgrind.sh` runs it for `n` and `2n` and
//! takes the difference, so set-up, warm-up and exit cancel out.
//!
//! impl: `base`, `breaker`, `attr`, `failsafe`, `recloser`, `tower`, `resilience`
//! (tower-resilience-circuitbreaker), `seatbelt`; with feature `fleet`, `fleet` (a `breaker` that is a
//! member of a fleet on a `redis-server` it starts; `closed_sync` and `open_sync` only).
//! workload (`base`): `bare`, `atomic_add`, `clock_read`, `mutex_lock`, `bare_async`;
//! (others): `closed_sync`, `open_sync`, `closed_async`, `open_async`; `breaker` also has
//! `forced_sync` and `owned_async`, `attr` `open_sync_typed` and `open_async_typed` (a
//! refusal into the function's own error type, which does not allocate).
//!
//! Part four's features: `retried` (`first_attempt`, `unconfigured`, `attr_first_attempt`:
//! async calls through the retry wrapper that succeed at once), `hedged` (`first_answer`,
//! `unconfigured`: through `call_hedged`, the first attempt answering before the delay),
//! `reconfigured`
//! (`closed_sync` on a breaker reconfigured before every 8th call: count inside
//! `Reconfigured::closed_sync` with `--toggle-collect`), and with feature `grpc`, `layer`
//! (`bare`, `grpc`, `http`, `resilience`: one request through each tower layer).

use std::process::ExitCode;

use breaker_bench::{
    async_loop, sync_loop, Attr, Baselines, Failsafe, Hedged, Recloser, Reconfigured, Retried,
    Runtime, Seatbelt, Tower, TowerResilience,
};

/// The four workloads every implementation has, run on `$b`; `true` once run.
macro_rules! workloads {
    ($b:ident, $n:expr, $imp:expr, $workload:expr) => {{
        match $workload.as_str() {
            "closed_sync" => sync_loop($n, |x| $b.closed_sync(x)),
            "open_sync" => sync_loop($n, |x| $b.open_sync(x)),
            "closed_async" => async_loop!($n, |x| $b.closed_async(x)),
            "open_async" => async_loop!($n, |x| $b.open_async(x)),
            _ => return unknown($imp, $workload),
        }
        true
    }};
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(imp), Some(workload), Some(n)) = (
        args.get(1),
        args.get(2),
        args.get(3).and_then(|n| n.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: cg <impl> <workload> <n>");
        return ExitCode::from(2);
    };
    let ran = match imp.as_str() {
        "base" => {
            let b = Baselines::new();
            match workload.as_str() {
                "bare" => sync_loop(n, |x| b.bare(x)),
                "atomic_add" => sync_loop(n, |_| b.atomic_add()),
                "clock_read" => sync_loop(n, |_| b.clock_read()),
                "clock_std" => sync_loop(n, |_| b.clock_std()),
                "clock_coarse" => sync_loop(n, |_| b.clock_coarse()),
                "clock_quanta" => sync_loop(n, |_| b.clock_quanta()),
                "mutex_lock" => sync_loop(n, |_| b.mutex_lock()),
                "bare_async" => async_loop!(n, |x| b.bare_async(x)),
                _ => return unknown(imp, workload),
            }
            true
        }
        "breaker" => {
            let b = Runtime::new();
            match workload.as_str() {
                "closed_sync" => sync_loop(n, |x| b.closed_sync(x)),
                "open_sync" => sync_loop(n, |x| b.open_sync(x)),
                "forced_sync" => sync_loop(n, |x| b.forced_sync(x)),
                "closed_async" => async_loop!(n, |x| b.closed_async(x)),
                "open_async" => async_loop!(n, |x| b.open_async(x)),
                "owned_async" => async_loop!(n, |x| b.owned_async(x)),
                _ => return unknown(imp, workload),
            }
            true
        }
        "attr" => match Attr::new() {
            None => false,
            Some(b) => match workload.as_str() {
                "open_sync_typed" => {
                    sync_loop(n, |x| b.open_sync_typed(x));
                    true
                }
                "open_async_typed" => {
                    async_loop!(n, |x| b.open_async_typed(x));
                    true
                }
                _ => workloads!(b, n, imp, workload),
            },
        },
        "failsafe" => {
            let b = Failsafe::new();
            workloads!(b, n, imp, workload)
        }
        "recloser" => {
            let b = Recloser::new();
            workloads!(b, n, imp, workload)
        }
        "tower" => {
            let mut b = Tower::new();
            workloads!(b, n, imp, workload)
        }
        "resilience" => {
            let mut b = TowerResilience::new();
            workloads!(b, n, imp, workload)
        }
        "seatbelt" => {
            let b = Seatbelt::new();
            workloads!(b, n, imp, workload)
        }
        "retried" => {
            let b = Retried::new();
            match workload.as_str() {
                "first_attempt" => async_loop!(n, |x| b.first_attempt(x)),
                "unconfigured" => async_loop!(n, |x| b.unconfigured(x)),
                "attr_first_attempt" => async_loop!(n, |x| b.attr_first_attempt(x)),
                _ => return unknown(imp, workload),
            }
            true
        }
        "hedged" => {
            let b = Hedged::new();
            match workload.as_str() {
                "first_answer" => async_loop!(n, |x| b.first_answer(x)),
                "unconfigured" => async_loop!(n, |x| b.unconfigured(x)),
                _ => return unknown(imp, workload),
            }
            true
        }
        "reconfigured" => {
            // Reconfigured before every 8th call, outside the counted function (count inside
            // `Reconfigured::closed_sync` with `--toggle-collect`).
            let b = Reconfigured::here();
            match workload.as_str() {
                "closed_sync" => sync_loop(n, |x| {
                    if x % 8 == 0 {
                        b.reconfigure(x / 8);
                    }
                    b.closed_sync(x)
                }),
                _ => return unknown(imp, workload),
            }
            true
        }
        #[cfg(feature = "grpc")]
        "layer" => {
            let mut b = breaker_bench::layers::Layers::new();
            let rt = breaker_bench::current_thread();
            macro_rules! requests {
                ($svc:expr) => {
                    rt.block_on(async {
                        for _ in 0..breaker_bench::WARM_UP + n {
                            std::hint::black_box(breaker_bench::layers::request(&mut $svc).await);
                        }
                    })
                };
            }
            match workload.as_str() {
                "bare" => requests!(b.bare),
                "grpc" => requests!(b.grpc),
                "http" => requests!(b.http),
                "resilience" => requests!(b.resilience),
                _ => return unknown(imp, workload),
            }
            true
        }
        #[cfg(feature = "fleet")]
        "fleet" => {
            let b = match breaker_bench::FleetMember::new() {
                Ok(b) => b,
                Err(why) => {
                    eprintln!("cg: fleet: {why}");
                    return ExitCode::FAILURE;
                }
            };
            match workload.as_str() {
                "closed_sync" => sync_loop(n, |x| b.closed_sync(x)),
                "open_sync" => sync_loop(n, |x| b.open_sync(x)),
                _ => return unknown(imp, workload),
            }
            true
        }
        _ => return unknown(imp, workload),
    };
    if ran {
        ExitCode::SUCCESS
    } else {
        // 3: this workload is not available (the attribute is still a placeholder).
        eprintln!("cg: {imp} is not available");
        ExitCode::from(3)
    }
}

fn unknown(imp: &str, workload: &str) -> ExitCode {
    eprintln!("cg: unknown implementation/workload: {imp} {workload}");
    ExitCode::from(2)
}
