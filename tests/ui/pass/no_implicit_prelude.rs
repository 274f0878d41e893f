//! The generated code names every trait method by its full path: a crate under
//! `#![no_implicit_prelude]` compiles, whatever shape the function has.
#![no_implicit_prelude]
#![allow(dead_code)]

use ::breaker::{circuit_breaker, BreakerError, CallError};
use ::std::result::Result::{self, Err, Ok};
use ::std::string::String;

#[derive(Debug)]
struct Failed;

impl ::std::convert::From<BreakerError> for Failed {
    fn from(_: BreakerError) -> Self {
        Failed
    }
}

fn transient(_: &Failed) -> bool {
    true
}

fn judge(r: &Result<u32, Failed>) -> ::breaker::Verdict {
    match r {
        Ok(_) => ::breaker::Verdict::Success,
        Err(_) => ::breaker::Verdict::Failure,
    }
}

#[circuit_breaker]
async fn minimal(n: u32) -> Result<u32, Failed> {
    Ok(n)
}

#[circuit_breaker(threshold = 3, cool_off = "5s", timeout = "1s", is_failure = transient)]
async fn configured(n: u32) -> Result<u32, Failed> {
    Ok(n)
}

#[circuit_breaker(classify = judge)]
fn classified(n: u32) -> Result<u32, Failed> {
    Ok(n)
}

async fn zero(_: &str, _: CallError<Failed>) -> Result<u32, Failed> {
    Ok(0)
}

#[circuit_breaker(key = host, fallback = zero)]
async fn keyed(host: &str) -> Result<u32, Failed> {
    Ok(3)
}

#[circuit_breaker(key = id, name = "by_id", fallback = |_, _| Ok(0))]
fn keyed_sync(id: u64) -> Result<u64, Failed> {
    Ok(id)
}

struct Client {
    host: String,
}

impl Client {
    #[circuit_breaker(fallback = Client::none)]
    async fn get(&self) -> Result<u32, Failed> {
        Ok(1)
    }

    async fn none(&self, _: CallError<Failed>) -> Result<u32, Failed> {
        Ok(0)
    }

    #[circuit_breaker(key = &self.host)]
    async fn by_host(&self) -> Result<u32, Failed> {
        Ok(2)
    }
}

fn main() {}
