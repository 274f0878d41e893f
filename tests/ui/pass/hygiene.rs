//! The generated code names only `::breaker::…` paths and hygienic locals: a crate with its
//! own `core`, `std`, `Breaker`, `Result`, `Ok`, `Lazy` and `__breaker*` names still compiles.
#![allow(dead_code, unused_macros, non_camel_case_types, non_snake_case, clippy::all)]

mod core {}
mod std {}
mod once_cell {}
mod tokio {}

struct Breaker;
struct Lazy;
struct Config;
struct Duration;
struct __BREAKER_TYPE;

#[derive(Debug)]
struct Failed;

impl From<::breaker::BreakerError> for Failed {
    fn from(_: ::breaker::BreakerError) -> Self {
        Failed
    }
}

type Result<T> = ::core::result::Result<T, Failed>;

fn cached(__breaker: u32, __breaker_err: ::breaker::CallError<Failed>) -> Result<u32> {
    let _ = __breaker_err;
    ::core::result::Result::Ok(__breaker)
}

macro_rules! concat {
    ($($t:tt)*) => {
        "shadowed"
    };
}

macro_rules! module_path {
    () => {
        "shadowed"
    };
}

#[::breaker::circuit_breaker(threshold = 2, cool_off = "1s", fallback = cached)]
fn lookup(__breaker: u32) -> Result<u32> {
    let __breaker_ok = __breaker + 1;
    let __BREAKER = __breaker_ok;
    ::core::result::Result::Ok(__BREAKER)
}

#[::breaker::circuit_breaker(timeout = "1s")]
async fn fetch(__breaker_err: u32) -> Result<u32> {
    ::core::result::Result::Ok(__breaker_err)
}

fn main() {
    let _ = lookup(1);
    let _ = fetch(1);
}
