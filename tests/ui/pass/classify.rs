//! `classify = …`: a path (checked as `fn(&Result<T, E>) -> Verdict`) or a closure, on
//! `async fn` and `fn`, with and without a fallback, through a `Result` alias.
use breaker::{circuit_breaker, BreakerError, CallError, Verdict};
use std::time::Duration;

struct Response {
    status: u16,
}

fn judge(r: &Result<Response, BreakerError>) -> Verdict {
    match r {
        Ok(resp) if resp.status == 429 => Verdict::OpenFor(Duration::from_secs(30)),
        Ok(resp) if resp.status >= 500 => Verdict::Failure,
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::Failure,
    }
}

#[circuit_breaker(classify = judge, threshold = 3)]
async fn get(status: u16) -> Result<Response, BreakerError> {
    Ok(Response { status })
}

#[circuit_breaker(classify = |r| match r { Ok(n) if *n > 10 => Verdict::Failure, _ => Verdict::Success })]
fn count(n: u32) -> std::io::Result<u32> {
    Ok(n)
}

#[circuit_breaker(classify = judge, fallback = cached)]
async fn get_cached(status: u16) -> Result<Response, BreakerError> {
    Ok(Response { status })
}

async fn cached(_status: u16, _e: CallError<BreakerError>) -> Result<Response, BreakerError> {
    Ok(Response { status: 200 })
}

#[circuit_breaker(classify = |_r: &Result<u8, String>| Verdict::Neutral, fallback = |_e| Ok(0))]
fn neutral() -> Result<u8, String> {
    Ok(1)
}

fn main() {
    let _ = get(200);
    let _ = count(1);
    let _ = get_cached(503);
    let _ = neutral();
}
