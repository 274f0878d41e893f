//! An annotated `async fn` becomes `fn … -> impl Future<Output = R>` (its future keeps each
//! argument once): every signature an `async fn` may have must still compile, in a crate of
//! edition 2021, whose own `impl Trait` would not capture the elided lifetimes.
#![deny(warnings)]
use breaker::{circuit_breaker, BreakerError};
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

#[derive(Debug)]
struct E;

impl From<BreakerError> for E {
    fn from(_: BreakerError) -> Self {
        E
    }
}

struct Point {
    x: u32,
    y: u32,
}

// Patterns in parameters: bound in the function's block.
#[circuit_breaker]
async fn tuple((a, b): (u32, &str), Point { x, y }: Point, _: String, mut n: u32) -> Result<u32, E> {
    n += 1;
    Ok(a + b.len() as u32 + x + y + n)
}

// A key and `retry` read what a pattern bound. (A fallback needs plain names: it receives them.)
#[circuit_breaker(key = host, retry = 2)]
async fn tuple_keyed((host, port): (&str, u16)) -> Result<usize, E> {
    Ok(host.len() + usize::from(port))
}

// Arguments that are `Send` but not `Sync`: the body owns them, the future stays `Send`
// (with a key, a pattern parameter, `#[tracing::instrument]` below).
#[circuit_breaker(key = tenant.clone())]
async fn upload(tenant: String, seen: Cell<u8>) -> Result<u8, E> {
    seen.set(1);
    std::future::ready(()).await;
    Ok(seen.get())
}

#[circuit_breaker]
async fn wildcard_cell(seen: Cell<u8>, _: u8) -> Result<u8, E> {
    std::future::ready(()).await;
    Ok(seen.get())
}

#[circuit_breaker]
#[tracing::instrument(skip(seen))]
async fn instrumented_cell(seen: Cell<u8>) -> Result<u8, E> {
    std::future::ready(()).await;
    Ok(seen.get())
}

// `#[tracing::instrument]` below names a pattern's bindings: the `async fn` is kept.
#[circuit_breaker]
#[tracing::instrument(skip(b), fields(sum = a + 1))]
async fn instrumented_pattern((a, b): (u8, Cell<u8>)) -> Result<u8, E> {
    Ok(a + b.get())
}

// An inner attribute in the body, with `#[tracing::instrument]` below: the `async fn` is kept.
#[circuit_breaker]
#[tracing::instrument]
async fn instrumented_inner(x: u32) -> Result<u32, E> {
    #![allow(unused_mut)]
    let mut y = x;
    Ok(y)
}

// The function is made `#[inline]`, but not over an `inline` of the user's.
#[circuit_breaker]
#[inline(never)]
async fn not_inlined(x: u32) -> Result<u32, E> {
    Ok(x)
}

// Lifetimes elided inside an `impl Trait` parameter, which only an `async fn` may write.
#[circuit_breaker]
async fn elided_in_impl(words: impl Iterator<Item = &str>, text: impl Into<Cow<'_, str>>) -> Result<usize, E> {
    Ok(words.count() + text.into().len())
}

// A judge closure reading an argument the body does not take.
#[derive(Debug)]
struct Code(u16);

impl From<BreakerError> for Code {
    fn from(_: BreakerError) -> Self {
        Code(0)
    }
}

#[circuit_breaker(is_failure = |e: &Code| e.0 != ignore)]
async fn judged(ignore: u16, x: u16) -> Result<u16, Code> {
    Ok(x)
}

// Elided, named and `'_` lifetimes, generics, `impl Trait` arguments, a where clause.
struct Text<'a>(&'a str);

#[circuit_breaker]
async fn lifetimes<'a, T: Display + Send>(
    text: Text<'_>,
    named: &'a str,
    shown: impl Display + Send,
    value: T,
) -> Result<String, E>
where
    T: Clone,
{
    Ok(format!("{}{named}{shown}{}", text.0, value.clone()))
}

// `impl Trait` in the return type, and returns that coerce.
#[circuit_breaker]
async fn opaque(n: u32) -> Result<impl Display, E> {
    if n == 0 {
        return Ok(n + 1);
    }
    Ok(n)
}

#[circuit_breaker]
async fn boxed(n: u32) -> Result<Box<dyn Display + Send>, E> {
    Ok(Box::new(n))
}

// Recursion through a box.
#[circuit_breaker]
async fn countdown(n: u32) -> Result<u32, E> {
    if n == 0 {
        return Ok(0);
    }
    Ok(Box::pin(countdown(n - 1)).await? + 1)
}

unsafe fn read(p: *const u8) -> u8 {
    unsafe { *p }
}

#[circuit_breaker]
async unsafe fn unsafe_async(p: usize) -> Result<u8, E> {
    Ok(unsafe { read(p as *const u8) })
}

// Every receiver, inherent and in a trait's `impl`.
struct Client {
    base: String,
}

impl Client {
    #[circuit_breaker]
    async fn by_ref(&self, path: &str) -> Result<String, E> {
        Ok(format!("{}{path}", self.base))
    }

    #[circuit_breaker]
    async fn by_mut(&mut self, path: &str) -> Result<usize, E> {
        self.base.push_str(path);
        Ok(self.base.len())
    }

    #[circuit_breaker]
    async fn by_value(self) -> Result<String, E> {
        Ok(self.base)
    }

    #[circuit_breaker]
    async fn by_arc(self: Arc<Self>) -> Result<usize, E> {
        Ok(self.base.len())
    }

    #[circuit_breaker]
    async fn by_pin(self: Pin<&mut Self>) -> Result<usize, E> {
        Ok(self.base.len())
    }

    #[circuit_breaker]
    async fn by_box(self: Box<Self>) -> Result<String, E> {
        Ok(self.base)
    }
}

trait Fetch {
    async fn fetch(&self, id: u32) -> Result<u32, E>;
    fn fetch_send(&self, id: u32) -> impl Future<Output = Result<u32, E>> + Send;
}

impl Fetch for Client {
    #[circuit_breaker]
    async fn fetch(&self, id: u32) -> Result<u32, E> {
        Ok(id + self.base.len() as u32)
    }

    #[circuit_breaker(fallback = |_this: &Self, id, _e| async move { Ok(id) })]
    async fn fetch_send(&self, id: u32) -> Result<u32, E> {
        Ok(id)
    }
}

// An attribute the attribute does not know stays above an `async fn` (it may need one).
#[circuit_breaker]
#[cfg_attr(all(), allow(unused_mut))]
async fn other_attribute_below(host: &str) -> Result<usize, E> {
    Ok(host.len())
}

fn is_send<T: Send>(t: T) -> T {
    t
}

fn main() {
    let text = String::from("t");
    let _ = is_send(tuple((1, "b"), Point { x: 1, y: 2 }, String::new(), 0));
    let _ = is_send(tuple_keyed(("h", 80)));
    let _ = is_send(lifetimes(Text(&text), &text, 5, 6u8));
    let _ = is_send(opaque(1));
    let _ = is_send(boxed(1));
    let _ = is_send(countdown(3));
    let _ = unsafe { unsafe_async(0) };
    let mut client = Client { base: text.clone() };
    let _ = is_send(client.by_ref("/a"));
    let _ = is_send(client.by_mut("/b"));
    let _ = is_send(client.fetch(1));
    let _ = is_send(client.fetch_send(1));
    let _ = is_send(Arc::new(Client { base: text.clone() }).by_arc());
    let mut pinned = Client { base: text.clone() };
    let _ = Pin::new(&mut pinned).by_pin();
    let _ = Box::new(Client { base: text.clone() }).by_box();
    let _ = is_send(client.by_value());
    let _ = is_send(other_attribute_below("h"));
    let _ = is_send(upload(String::new(), Cell::new(0)));
    let _ = is_send(wildcard_cell(Cell::new(0), 1));
    let _ = is_send(instrumented_cell(Cell::new(0)));
    let _ = instrumented_pattern((1, Cell::new(0)));
    let _ = is_send(elided_in_impl(["a"].into_iter(), "b"));
    let _ = is_send(judged(404, 1));
    let _ = is_send(instrumented_inner(1));
    let _ = is_send(not_inlined(1));
}
