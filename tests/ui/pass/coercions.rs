//! The body keeps the function's return type: every coercion the plain `async fn` accepts
//! (unsized boxes, `&String` to `&str`, `&Vec` to a slice, fn items to pointers, `return
//! Err(Box::new(e))` to a boxed error, closures to `Box<dyn Fn>`) compiles under the
//! attribute, with and without a fallback, keyed, under `#[async_trait]`, and with
//! `#[tracing::instrument]` above and below (above with a fallback and owned arguments).
#![allow(dead_code)]
use breaker::{circuit_breaker, BreakerError, CallError};
use std::error::Error;
use std::fmt::Display;

#[derive(Debug)]
struct MyErr;

impl From<BreakerError> for MyErr {
    fn from(_: BreakerError) -> Self {
        MyErr
    }
}

type BoxError = Box<dyn Error + Send + Sync>;
type Adder = Box<dyn Fn(u32) -> u32 + Send>;

fn double(x: u32) -> u32 {
    x * 2
}

#[circuit_breaker]
async fn unsized_box() -> Result<Box<dyn Display + Send>, MyErr> {
    Ok(Box::new(5u32))
}

#[circuit_breaker]
async fn fn_pointer() -> Result<fn(u32) -> u32, MyErr> {
    Ok(double)
}

#[circuit_breaker]
async fn boxed_error(fail: bool) -> Result<u32, BoxError> {
    if fail {
        let e = std::io::Error::other("refused");
        return Err(Box::new(e));
    }
    Ok(1)
}

#[circuit_breaker]
async fn closure(n: u32) -> Result<Adder, MyErr> {
    Ok(Box::new(move |x| x + n))
}

struct Doc {
    text: String,
    nums: Vec<u32>,
}

impl Doc {
    #[circuit_breaker]
    async fn text(&self) -> Result<&str, MyErr> {
        Ok(&self.text)
    }

    #[circuit_breaker]
    async fn nums(&self) -> Result<&[u32], MyErr> {
        Ok(&self.nums)
    }

    #[circuit_breaker(key = self.text.as_str())]
    async fn keyed_nums(&self) -> Result<&[u32], MyErr> {
        Ok(&self.nums)
    }

    #[circuit_breaker(fallback = Doc::no_text)]
    async fn text_or_none(&self) -> Result<&str, MyErr> {
        Ok(&self.text)
    }

    async fn no_text(&self, _: CallError<MyErr>) -> Result<&str, MyErr> {
        Ok("")
    }
}

async fn nothing(_: CallError<MyErr>) -> Result<Box<dyn Display + Send>, MyErr> {
    Ok(Box::new("nothing"))
}

#[circuit_breaker(fallback = nothing)]
async fn unsized_box_with_fallback() -> Result<Box<dyn Display + Send>, MyErr> {
    Ok(Box::new(5u32))
}

async fn not_failing(_: bool, _: CallError<BoxError>) -> Result<u32, BoxError> {
    Ok(0)
}

#[circuit_breaker(fallback = not_failing)]
async fn boxed_error_with_fallback(fail: bool) -> Result<u32, BoxError> {
    if fail {
        return Err(Box::new(std::io::Error::other("refused")));
    }
    Ok(1)
}

#[circuit_breaker(key = host, fallback = |_, _| async { Ok(Box::new(0u8) as Box<dyn Display + Send>) })]
async fn keyed_unsized_box(host: &str) -> Result<Box<dyn Display + Send>, MyErr> {
    Ok(Box::new(host.len()))
}

#[tracing::instrument]
#[circuit_breaker]
async fn instrument_above() -> Result<Box<dyn Display + Send>, MyErr> {
    Ok(Box::new(5u32))
}

#[circuit_breaker]
#[tracing::instrument]
async fn instrument_below() -> Result<Box<dyn Display + Send>, MyErr> {
    Ok(Box::new(5u32))
}

async fn length_of(s: String, _: CallError<MyErr>) -> Result<usize, MyErr> {
    Ok(s.len())
}

// Above, with a fallback: the fallback still receives the owned argument.
#[tracing::instrument]
#[circuit_breaker(fallback = length_of)]
async fn instrument_above_owned(s: String) -> Result<usize, MyErr> {
    Ok(s.len())
}

#[tracing::instrument(err(Debug), ret)]
#[circuit_breaker(fallback = length_of)]
async fn instrument_above_err_ret(s: String) -> Result<usize, MyErr> {
    Ok(s.len())
}

#[tracing::instrument(ret)]
#[circuit_breaker(fallback = length_of)]
async fn instrument_above_ret(s: String) -> Result<usize, MyErr> {
    Ok(s.len())
}

#[circuit_breaker(fallback = length_of)]
#[tracing::instrument]
async fn instrument_below_owned(s: String) -> Result<usize, MyErr> {
    Ok(s.len())
}

#[tracing::instrument(skip(nums))]
#[circuit_breaker(fallback = |_, _| async { Err(Box::new(std::io::Error::other("no")) as BoxError) })]
async fn instrument_above_boxed_error(nums: Vec<u32>) -> Result<u32, BoxError> {
    if nums.is_empty() {
        return Err(Box::new(std::io::Error::other("empty")));
    }
    Ok(nums[0])
}

#[async_trait::async_trait]
trait Source {
    async fn name(&self) -> Result<Box<dyn Display + Send>, MyErr>;
}

struct Fixed;

#[async_trait::async_trait]
impl Source for Fixed {
    #[circuit_breaker]
    async fn name(&self) -> Result<Box<dyn Display + Send>, MyErr> {
        Ok(Box::new(5u32))
    }
}

fn main() {}
