//! The two churn rows of `benches/keyed_churn.rs` as a plain program, for a profiler:
//! dropping 20 000 idle `Breaker`s, and `retain_active` dropping 20 000 idle keys, each in a
//! function of its own so callgrind can count it alone:
//!
//! ```text
//! cd benches && cargo build --release --bin churn_profile
//! valgrind --tool=callgrind --toggle-collect='churn_profile::do_drop' \
//!     target/release/churn_profile drop 2
//! IDLE_MS=20000 valgrind --tool=callgrind --toggle-collect='churn_profile::do_sweep' \
//!     target/release/churn_profile sweep 1
//! target/release/churn_profile drop 30     # wall time per round
//! ```
//!
//! Under valgrind, give the sweep an `IDLE_MS` longer than making the keys takes, or the
//! sweeps that new keys run on their own drop them first.

use std::time::{Duration, Instant};

use breaker::{Breaker, Config, KeyedBreaker};

const N: usize = 20_000;

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let rounds: u32 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let idle = Duration::from_millis(
        std::env::var("IDLE_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(50),
    );
    let mut total = Duration::ZERO;
    for _ in 0..rounds {
        total += match which.as_str() {
            "drop" => {
                let all: Vec<Breaker> = (0..N)
                    .map(|i| Breaker::new(format!("bench::drop[{i}]"), Config::default()))
                    .collect();
                let t = Instant::now();
                do_drop(std::hint::black_box(all));
                t.elapsed()
            }
            "sweep" => {
                let config = Config::default().idle(idle).max_keys(N);
                let k = KeyedBreaker::<u64>::new("bench::sweep", config);
                for i in 0..N as u64 {
                    let _ = k.call_sync(&i, || Ok::<_, ()>(()));
                }
                std::thread::sleep(idle + Duration::from_millis(10));
                let t = Instant::now();
                do_sweep(&k);
                let took = t.elapsed();
                assert_eq!(k.len(), 0, "every key was idle");
                took
            }
            _ => {
                eprintln!("usage: churn_profile drop|sweep [ROUNDS]");
                std::process::exit(2);
            }
        };
    }
    println!("{which}: {:?} per round", total / rounds);
}

#[inline(never)]
fn do_drop(all: Vec<Breaker>) {
    drop(all)
}

#[inline(never)]
fn do_sweep(k: &KeyedBreaker<u64>) {
    k.retain_active()
}
