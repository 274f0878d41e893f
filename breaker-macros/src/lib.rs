//! The `#[circuit_breaker]` attribute of [`breaker`](https://docs.rs/breaker). Use it through
//! the `breaker` crate, which re-exports it with the runtime the generated code calls.
//!
//! By phase, input → checks → code (as thiserror's `impl/src/{ast,attr,valid,expand}.rs`):
//!
//! | module | what it does |
//! | --- | --- |
//! | `args` | parses `key = value` arguments into `Args`, each value with its span |
//! | `args::keys` | the one table of keys: field, kind, example, policy, needs, builder call |
//! | `args::values` | the value kinds (integer, percent, duration, …): parse, check, emit |
//! | `args::limits` | the runtime's caps and defaults the checks use, written once |
//! | `args::rules` | rules across keys (needs, exclusions, `config`, sizes) |
//! | `item` | the annotated function: parsed, its shape, the checks that need it |
//! | `errors` | the accumulator: every independent mistake reported at once |
//! | `suggest` | the closest valid key for an unknown one |
//! | `renamed` | a `breaker` dependency under another name, without `crate = "…"` |
//! | `expand` | generation: the rewritten function (`config`, `binding`, `call`, `fallback`) |
//! | `snapshots`, `never_panics` | tests: expansion snapshots, the parser never panics |
#![forbid(unsafe_code)]

mod args;
mod errors;
mod expand;
mod item;
mod renamed;
mod suggest;

#[cfg(test)]
mod never_panics;
#[cfg(test)]
mod snapshots;

use proc_macro::TokenStream;

/// Puts a circuit breaker in front of a function returning a `Result`.
///
/// Every call goes through one breaker, created on the first call and kept in a static inside
/// the function; the signature and the call sites do not change. An `Err` from the body counts
/// as a failure of the dependency (or as nothing, when `is_failure` says so); when the breaker
/// is open, the body is not run and the call fails with a [`BreakerError`] converted into the
/// function's error type, or goes to the `fallback`.
///
/// ```ignore
/// use breaker::{circuit_breaker, CallError};
///
/// #[circuit_breaker(threshold = 2, cool_off = "5s", timeout = "600ms")]
/// async fn charge(card: &Card, cents: u64) -> Result<Receipt, GatewayError> {
///     gateway.charge(card, cents).await // unchanged
/// }
/// ```
///
/// expands to (what `cargo expand` shows, comments added; `tests/expand/` holds checked
/// snapshots):
///
/// ```ignore
/// // The same signature to callers: an `async fn`'s future would keep each argument twice
/// // (rust-lang/rust#62958); the returned future keeps it once.
/// fn charge(
///     card: &Card,
///     cents: u64,
/// ) -> impl ::breaker::__private::Future<Output = Result<Receipt, GatewayError>> {
///     // The return type is named so `?` and `return` in the body know their target; the
///     // bounds on it give the "must return a `Result`" and "`E` cannot hold a
///     // `BreakerError`" errors, on the return type.
///     ::breaker::__private::run::<Result<Receipt, GatewayError>, _, _, _, _>(
///         {
///             // One breaker per function, made on the first call. The block keeps the
///             // items out of the body's scope.
///             fn __breaker_init() -> ::breaker::Breaker {
///                 ::breaker::__private::breaker_of(
///                     // Static text, so a refusal copies its name without a reference count.
///                     &::breaker::__private::concat!(
///                         ::breaker::__private::module_path!(), "::", "charge"
///                     ),
///                     false, // a default name is never shared; `name = "…"` gives `true`
///                     // The keys as data, a constant: the runtime calls the `Config`
///                     // builder of each, in this order, on `Config::DEFAULT`.
///                     &[
///                         ::breaker::__private::Set::threshold(2),
///                         ::breaker::__private::Set::cool_off(::breaker::__private::Dur::Secs(5)),
///                         ::breaker::__private::Set::timeout(
///                             ::breaker::__private::Dur::Millis(600),
///                         ),
///                     ],
///                 )
///             }
///             static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> =
///                 ::breaker::__private::Lazy::new(__breaker_init);
///             &__BREAKER
///         },
///         ::breaker::__private::every_error, // or the `is_failure` / `classify` judge
///         async move {
///             // (An argument with something to drop, neither a reference nor a number,
///             // would be named here, `let _ = &arg;`: it lives until the call ends.)
///             // Never runs: gives the block the function's return type.
///             if false {
///                 return ::breaker::__private::returns::<Result<Receipt, GatewayError>>();
///             }
///             gateway.charge(card, cents).await // the body, unchanged
///         },
///     )
/// }
/// ```
///
/// A plain `fn` gets `run_sync` and a `move ||` closure instead. With a `key` the call is
/// `run_keyed`, taking the key's breaker, looked up when the function is called. With a
/// `fallback`, `retry`, `config = …`, a judge closure or a pattern parameter, the function
/// returns an `async move` block of its own, which owns the arguments, around the call
/// (the guide's attribute page, `breaker::guide::attribute`, has the shapes); with `fallback = cached_receipt` the result goes to
/// `__private::recover(call(..).await, move |__breaker_err| …)`, which calls
/// `FallbackProbe::<_, _, Result<Receipt, GatewayError>>::new(cached_receipt, (card, cents,
/// __breaker_err)).__fallback()` on an error. The probe calls a fallback of the right shape;
/// any other is one error on the fallback's name showing the signature it must have ("this
/// fallback must be an `async fn(&Card, u64, CallError<GatewayError>) -> Result<Receipt,
/// GatewayError>`"). The body then borrows the arguments (`async { .. }`, not `async move`),
/// since the fallback receives them after it ran. When every argument is a copy as written
/// (`&self`, a shared reference, a number, a `bool`, a `char`; no `mut`, no `#[cfg]`) and
/// nothing else needs the block, there is none: the body's `async move` block and the
/// fallback's closure take a copy each, and the function returns
/// `__private::fall_back(call(..), move |__breaker_err| …)`, a small future that polls the
/// call, then the fallback's future (one generic state machine rather than an `async` block
/// per function, which compiles faster). An attribute below this one that it does
/// not know (`#[tokio::test]`, a framework's) keeps the `async fn` as written.
///
/// A method with a `self` receiver and no `name` gets an `InImpl` static instead of `Lazy`,
/// reached with `__BREAKER.of::<Self>()`: see [Default names](#default-names).
///
/// # Keys
///
/// Every key is optional; values are literals checked at compile time.
///
/// | key | value | default | meaning |
/// | --- | --- | --- | --- |
/// | `threshold` | integer ≥ 1 | 5 | consecutive failures that open the breaker |
/// | `failure_rate` | integer percent 1..=100 | off | open when this share of the calls in `window` failed (then `threshold` is off unless written too) |
/// | `window` | integer ≥ 1 (calls) or duration string | 100 calls | the sliding window `failure_rate` judges; needs `failure_rate` |
/// | `min_calls` | integer ≥ 1 | 10 (at most the window) | calls the window must hold before the rate is judged; needs `failure_rate` |
/// | `slow_call` | duration | off | a call at least this long counts as a failure (its result still goes to the caller) |
/// | `cool_off` | duration | `"10s"` | how long the breaker stays open before it admits a probe |
/// | `max_cool_off` | duration ≥ `cool_off` | off | each reopening from half-open doubles the cool-off, up to this |
/// | `jitter` | duration | off | a random extra 0..jitter added to each cool-off |
/// | `probes` | integer ≥ 1 | 1 | calls admitted at once while half-open |
/// | `success_threshold` | integer ≥ 1 | `probes` | consecutive successful probes that close the breaker |
/// | `timeout` | duration (`async fn` only) | off | deadline of one call; yields `BreakerError::Timeout` |
/// | `max_concurrent` | integer ≥ 1 | off | bulkhead: at most N calls in flight, more fail with `BreakerError::Full` |
/// | `is_failure` | path to `fn(&E) -> bool`, or closure | every error | which errors count; `false` makes the error neutral |
/// | `fallback` | path or closure | none | called on every failed call with the arguments then a `CallError<E>`; returns the function's type (awaited for an `async fn`); in a method a bare name means `Self::name`, called with `self` first (name a free function by path: `self::name`) |
/// | `name` | string literal | `{module}::{fn}`, or `{module}::{Type}::{method}` for a method with a `self` receiver | the breaker's name; functions giving the same `name` share one breaker (see [Default names](#default-names)) |
/// | `on_state_change` | path to `fn(&Transition)`, or closure | none | called on every transition |
/// | `config` | expression of type `breaker::Config` | none | built once, on the first call; replaces the policy keys (`threshold` … `max_concurrent`), combines with the others |
/// | `crate` | string literal path | `"::breaker"` | where the facade is, when it is re-exported |
/// | `key` | expression over the arguments (`self` included) | none | one breaker per value, evaluated before the body on every call (see [Keyed breakers](#keyed-breakers)) |
/// | `max_keys` | integer ≥ 1 (needs `key`) | 10 000 | at most this many keys have a breaker; a new key evicts the least recently used |
/// | `max_open` | integer percent 1..=100 (needs `key`) | none | at most this percent (at least one) of the live keys open or half-open at once; a key that would open beyond it stays closed, still counting |
/// | `idle` | duration (needs `key`) | `"10m"` | a key's breaker unused this long, and indistinguishable from a fresh one, is dropped |
/// | `classify` | path to `fn(&Result<T, E>) -> breaker::Verdict`, or closure | none | judges every finished call, `Ok` included; replaces `is_failure` (see [Judging results](#judging-results)) |
/// | `fleet` | `true` or `false` | `false` | the breaker joins the fleet installed with `breaker::fleet::install` (see [Fleets](#fleets)) |
/// | `hedge` | integer 1..=4 (`async fn` only) | off | extra attempts: while an attempt is slow (past `hedge_delay`) or after one fails, the body runs again and the first success wins, the others dropped; the arguments must be `Clone` or references (each attempt gets its own copy), a method takes `&self`; not with `retry` (a function hedges or retries, never both) |
/// | `hedge_delay` | `"p50"`…`"p99.9"`, or a duration 1 ms..=2 s (needs `hedge`) | `"p95"` | how long an attempt runs before the next is sent: that percentile of this breaker's latencies (no hedge before 100 samples), or a fixed delay |
/// | `hedge_budget` | integer percent 1..=100 (needs `hedge`) | 5 | at most this share of first attempts is hedged (over 10 s, at least one a second); a denied hedge fails nothing |
///
/// Durations are humantime strings: `"250ms"`, `"10s"`, `"1m 30s"`; zero is an error.
///
/// # Default names
///
/// Without `name`, a function is named `{module}::{fn}` (`module_path!()`), and a method with
/// a `self` receiver (`&self`, `&mut self`, `self`, `self: Box<Self>`, …)
/// `{module}::{Type}::{method}`: `app::Users::fetch` and `app::Orders::fetch` are two
/// breakers, each found by `registry().get`. `Type` is the last path segment of the `impl`'s
/// type without its generics (`Repo` for `impl<T> Repo<T>`); in a trait impl, the type the
/// trait is implemented for.
///
/// The attribute sees the method, not its `impl`, and neither `concat!` nor a `const` can
/// spell `Self`; the method's body can. So the static is made from the body, on the first
/// call, from `std::any::type_name::<Self>()` cut to its last segment. That text is
/// best-effort by rustc's promise; at worst a future compiler changes a default name, never
/// which breaker a call goes through. In a trait's *default* method every implementor shares
/// the one static, so it is named after the first implementor that calls it: give it a
/// `name`.
///
/// An associated function without `self` (`fn connect()`) cannot be told from a free one and
/// keeps `{module}::{fn}`, so two of them in one module share a name. Each still has its own
/// breaker, but `registry().get`, the metrics and the dashboard cannot tell them apart: the
/// second one made logs one `WARN` (target `breaker`, field `name`) asking for a `name = "…"`
/// on one of them. Explicit names never warn: giving one name is how functions share a
/// breaker.
///
/// # Keyed breakers
///
/// ```ignore
/// #[circuit_breaker(key = url.host_str().unwrap_or(""), threshold = 5, cool_off = "30s")]
/// async fn deliver_webhook(url: &Url, body: &[u8]) -> Result<(), HookError> { todo!() }
///
/// impl TenantDb {
///     #[circuit_breaker(key = self.tenant_id, failure_rate = 50, window = 20)]
///     async fn query(&self, sql: &str) -> Result<Rows, DbError> { todo!() }
/// }
/// ```
///
/// - The expression is evaluated before the body and borrowed, never moved: `key =
///   self.host` with a `String` field works in a `&self` method, and so does a temporary
///   (`key = url.host_str().unwrap_or("")`) or a pair (`key = (host, port)`). The borrow ends
///   once the key's breaker is found, before the body runs, so the body may move what the
///   key was computed from.
/// - Its type must be a key: `&str`, `String`, integers, `IpAddr`, `SocketAddr`,
///   `http::uri::Authority` (feature `http`), pairs of those (a pair holding a `&str` makes
///   a `String` per call), references to them, or a type of your own that implements
///   `breaker::BreakerKey` and `Clone` (or a reference to one). Any other type is a compile
///   error on the expression saying so. The lookup is chosen by the key's type at compile
///   time (`__private::KeyProbe`), so the expansion is the same for every kind of key.
/// - Each key's breaker is named `{name}[{key}]` (`hooks::deliver_webhook[example.com]`)
///   and listed in the registry under that name; all keys share the attribute's policy.
///   A key that already has a breaker costs one lookup and allocates nothing.
/// - `max_keys` and `idle` bound the map and need `key`; they are part of the policy, so with
///   `config = …` set them on the `Config` (`.max_keys(…)`, `.idle(…)`).
/// - An explicit `name` names the keyed map; unlike an unkeyed breaker's, it is not shared
///   with other functions that give the same name (each function has its own map).
/// - In a generic function the key's type may depend on the instantiation; each key type
///   then gets its own map, under the same name.
/// - Without `key`, a `&self` method has one breaker for every instance of its type.
///
/// With `key` the static holds the function's keyed map, made on the first call, and the
/// call then goes through the key's breaker exactly as without `key` (`fallback`,
/// `is_failure` and `classify` included; `tests/expand/keyed.expanded.rs` shows it whole):
///
/// ```ignore
/// let __breaker_keyed: ::breaker::Breaker = {
///     // `.method("query")`: named `{module}::TenantDb::query` by default, `Self` given by `of`.
///     static __BREAKER: ::breaker::__private::KeyedStatic =
///         ::breaker::__private::KeyedStatic::new(|| (module_path!(), config)).method("query");
///     ::breaker::__private::KeyProbe::new(&(self.tenant_id)).__breaker_lookup(__BREAKER.of::<Self>())
/// };
/// let __breaker: &::breaker::Breaker = &__breaker_keyed;
/// ::breaker::__private::run::<Result<Rows, DbError>, _, _, _, _>(__breaker, is_failure, body).await
/// ```
///
/// # Judging results
///
/// `classify = judge` with `fn judge(r: &Result<T, E>) -> breaker::Verdict` judges every
/// finished call: `Success`, `Failure` (an `Ok` answer that means failure, a 503 say),
/// `Neutral` (counts for nothing) or `OpenFor(duration)` (opens the breaker at once, for at
/// least `cool_off`). A path (a generic function too, like `breaker::http::classify`) is
/// checked at compile time against that signature with the function's own `T` and `E`, and
/// called directly: one of another type is one error on the path, saying
/// ``"`classify` must be a `fn(&Result<u32, QuoteError>) -> breaker::Verdict`"`` (and
/// pointing to `is_failure = f` with a `fn(&E) -> bool` for judging only the errors). A
/// closure's parameter type is inferred; one written with another type gets rustc's "type
/// mismatch in closure arguments", naming the signature it expected (followed by a second
/// error, that the closure is not a judge). It replaces
/// `is_failure` (both together is a compile error). Classification changes what the breaker
/// counts, never what the caller gets: an `Ok` judged a failure is still returned, and the
/// fallback still runs for every `Err` and every refusal. A panic in `classify` counts as a
/// failure and reaches the caller, as a panic in `is_failure` does.
///
/// # Fleets
///
/// `fleet = true` joins the breaker, when it is created, to the fleet installed with
/// `breaker::fleet::install(fleet)` (feature `redis`). Without an installed fleet, or
/// without the feature, the breaker logs one `WARN` and stays local. With `key`, every key's
/// breaker joins as it is created (the fleet shares signals per breaker name, so per key).
///
/// # `#[async_trait]`, boxed and `impl Future` functions
///
/// `#[async_trait]` on the `impl` expands before this attribute and hands it
/// `fn … -> Pin<Box<dyn Future<Output = R> + Send + '_>>` whose body is
/// `Box::pin(async move { … })`: the attribute recognises that shape and wraps the inner
/// block, so every key works as on an `async fn` (with a fallback the method must take
/// `&self` or `&mut self`). `#[tracing::instrument]` stacks on such a method in either
/// order; with a fallback put `#[circuit_breaker]` above it (instrument's own `async move`
/// would otherwise move the arguments the fallback needs). A function returning `impl Future<Output = Result<…>>`, or a
/// boxed future built otherwise, is a compile error asking for `async fn … -> Result<…>`;
/// an `async fn` in an impl fulfils a trait's `fn … -> impl Future<Output = …> + Send`.
///
/// # Rules
///
/// - The return type must be a `Result<T, E>` or an alias of one (`io::Result<T>`,
///   `anyhow::Result<T>`). Without a fallback `E` must implement
///   `From<breaker::BreakerError>`; if it does not, that is one error, on the return type:
///   ``"`QuoteError` cannot hold a `breaker::BreakerError`"``, noting to write `impl
///   From<breaker::BreakerError> for QuoteError` (with thiserror, a variant with `#[from]
///   breaker::BreakerError`) or to add a `fallback`, which receives a
///   `breaker::CallError<QuoteError>` instead.
/// - With a fallback, parameters must be plain names, and the body must not consume an
///   argument the fallback needs (take it by reference). A parameter under `#[cfg(…)]` is
///   passed to the fallback only where it is compiled in; give the fallback's parameter the
///   same `#[cfg]`.
/// - With a fallback, a `mut` argument reaches the fallback as the body left it.
/// - With a fallback, the body borrows the arguments (the fallback receives them after it
///   ran), so the function's future is `Send` only if every argument the body uses is `Sync`:
///   an argument that is `Send` but not `Sync` (`Cell<T>`, `RefCell<T>`,
///   `Box<dyn Error + Send>`) makes it `!Send`, and `tokio::spawn` rejects it. Without a
///   fallback the body owns its arguments and only needs them `Send`. Wrap such a value in a
///   `Mutex`, pass a `Sync` view of it, or drop the fallback and handle
///   `BreakerError` in the caller.
/// - The static breaker cannot mention the function's generic parameters, `Self` or
///   `self`: a `config` or `on_state_change` that does is a compile error on that token
///   (name the type instead). A generic function has one breaker for all its
///   instantiations.
///
/// [`BreakerError`]: https://docs.rs/breaker/latest/breaker/enum.BreakerError.html
#[proc_macro_attribute]
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::circuit_breaker(args.into(), item.into()).into()
}
