//! `is_failure = path` and `classify = path` reach the runtime without an `as` cast: a crate
//! that denies `trivial_casts` (and `trivial_numeric_casts`) compiles.
#![deny(trivial_casts, trivial_numeric_casts)]
#![allow(dead_code)]
use breaker::{circuit_breaker, BreakerError, Verdict};

#[derive(Debug)]
enum Failed {
    Timeout,
    Breaker(BreakerError),
}

impl From<BreakerError> for Failed {
    fn from(e: BreakerError) -> Self {
        Failed::Breaker(e)
    }
}

fn transient(e: &Failed) -> bool {
    matches!(e, Failed::Timeout)
}

fn judge(r: &Result<u32, Failed>) -> Verdict {
    match r {
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::Failure,
    }
}

mod judges {
    pub fn transient(_: &super::Failed) -> bool {
        true
    }
}

#[circuit_breaker(is_failure = transient)]
async fn judged(n: u32) -> Result<u32, Failed> {
    Ok(n)
}

#[circuit_breaker(is_failure = judges::transient)]
fn judged_sync(n: u32) -> Result<u32, Failed> {
    Ok(n)
}

#[circuit_breaker(classify = judge)]
async fn classified(n: u32) -> Result<u32, Failed> {
    Ok(n)
}

#[circuit_breaker(classify = judge, fallback = |_, _| Ok(0))]
fn classified_sync(n: u32) -> Result<u32, Failed> {
    Ok(n)
}

fn main() {}
