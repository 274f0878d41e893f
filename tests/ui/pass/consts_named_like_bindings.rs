//! A constant in scope named like a generated binding cannot capture it (a `const` in a
//! pattern is a constant pattern, whatever the binding's hygiene): every shape compiles.
#![allow(dead_code, non_upper_case_globals)]
use breaker::{circuit_breaker, BreakerError, CallError};

const __breaker: u32 = 1;
const __breaker_ok: u32 = 2;
const __breaker_err: u32 = 3;
const __breaker_keyed: u32 = 4;
const __breaker_recover: u32 = 5;
const __name: u32 = 6;
const __ret: u32 = 7;
const __BREAKER: u32 = 8;
const __NAME: u32 = 9;

#[derive(Debug)]
struct Failed;

impl From<BreakerError> for Failed {
    fn from(_: BreakerError) -> Self {
        Failed
    }
}

#[circuit_breaker]
async fn minimal(n: u32) -> Result<u32, Failed> {
    Ok(n + __breaker)
}

#[circuit_breaker]
fn minimal_sync(n: u32) -> Result<u32, Failed> {
    Ok(n)
}

async fn zero(_: &str, _: CallError<Failed>) -> Result<u32, Failed> {
    Ok(0)
}

#[circuit_breaker(key = host, fallback = zero)]
async fn keyed(host: &str) -> Result<u32, Failed> {
    Ok(3)
}

#[circuit_breaker(key = id, fallback = |_, _| Ok(0))]
fn keyed_sync(id: u64) -> Result<u64, Failed> {
    Ok(id)
}

#[circuit_breaker(fallback = |#[cfg(unix)] _, _| async { Ok(0) })]
async fn gated(#[cfg(unix)] n: u32) -> Result<u32, Failed> {
    Ok(1)
}

struct Client;

impl Client {
    #[circuit_breaker(fallback = Client::none)]
    async fn get(&self) -> Result<u32, Failed> {
        Ok(1)
    }

    #[circuit_breaker]
    fn get_sync(&self) -> Result<u32, Failed> {
        Ok(1)
    }

    async fn none(&self, _: CallError<Failed>) -> Result<u32, Failed> {
        Ok(0)
    }

    #[circuit_breaker(key = "one", fallback = Client::none)]
    async fn keyed(&self) -> Result<u32, Failed> {
        Ok(2)
    }
}

fn main() {}
