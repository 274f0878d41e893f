//! A [`reqwest-middleware`](reqwest_middleware) middleware (feature `reqwest`): one breaker
//! per `host:port`, every answer judged by the [`http` preset](crate::http).
//!
//! ```no_run
//! use breaker::reqwest::CircuitBreakerMiddleware;
//! use reqwest_middleware::ClientBuilder;
//! use reqwest_retry::{policies::ExponentialBackoff, RetryTransientMiddleware};
//!
//! # async fn run() -> Result<(), reqwest_middleware::Error> {
//! let breakers = CircuitBreakerMiddleware::new(); // clones share the breakers
//! let client = ClientBuilder::new(reqwest::Client::new())
//!     // Outside: retries (a refused request is not retried: its error is fatal to them).
//!     .with(RetryTransientMiddleware::new_with_policy(
//!         ExponentialBackoff::builder().build_with_max_retries(3),
//!     ))
//!     // Inside: the breaker sees, judges and counts every attempt.
//!     .with(breakers.clone())
//!     .build();
//!
//! match client.get("http://inventory.internal/items").send().await {
//!     Ok(answer) => println!("{}", answer.status()),
//!     // The refusal, found through reqwest-retry's wrapping.
//!     Err(e) => match breaker::reqwest::breaker_error(&e) {
//!         Some(refused) => println!("not calling it: {refused}"), // "… is open; retry in 2.9s"
//!         None => return Err(e),
//!     },
//! }
//! println!("{:?}", breakers.breaker("inventory.internal:80").state());
//! # Ok(()) }
//! ```
//!
//! **Order**: put the breaker *inside* the retry middleware (added after it with `.with`),
//! as above. Middlewares run in the order they were added, so the retry loop calls the
//! breaker once per attempt: each failed attempt counts against the host, a burst of retries
//! trips it as the failures happen, and once it is open the next attempt is refused at once
//! with a `Middleware` error, which `reqwest-retry` treats as fatal: the loop stops instead
//! of hammering a host that said it is down. In the other order the breaker would see one
//! call per *logical* request however many attempts failed, count too little and too late,
//! and the retries would keep going at a host it knows is sick.
//!
//! **Judging**: an answer is judged by [`verdict`](crate::http::verdict): 5xx and 408 are
//! failures, other 4xx count for nothing, and a 429 or a 503 with `Retry-After` opens that
//! host's breaker at once for exactly as long as the server asked, whatever `cool_off` is
//! (capped by `max_cool_off`, 5 minutes without it; a 429 without `Retry-After` is one
//! failure, not an opening), so the client stays away exactly as long as it was told to: with
//! [`new`](CircuitBreakerMiddleware::new)'s 10 s cool-off, `Retry-After: 2` means the
//! server is called again after 2 s. Every answer still reaches the caller as it is. A request that
//! did not get an answer (connection refused, reset, timed out) is a failure.
//!
//! **Refusals** fail with [`reqwest_middleware::Error::Middleware`] whose `anyhow::Error`
//! downcasts to [`BreakerError`] (`Open` with its `retry_in`, `Full` with `max_concurrent`,
//! `Timeout` with the config's `timeout`). Behind `reqwest-retry` the error the caller gets is
//! its `RetryError` around that one (transparently, so it displays the same but downcasts
//! differently); [`breaker_error`] finds the refusal either way.
//!
//! **Retries of its own**: with [`Config::retry`](crate::Config::retry) in the
//! middleware's configuration ([`with_config`](CircuitBreakerMiddleware::with_config)), it
//! retries a failed request itself, each attempt through the host's breaker, paid from that
//! host's retry budget, after the backoff or the answer's `Retry-After` (see
//! [`breaker::retry`](crate::retry)); a refusal and a neutral answer are not retried. A
//! request whose body cannot be sent again (a stream) is sent once. Inner middlewares see a
//! copy of the extensions per attempt. Then leave `reqwest-retry` out.
//!
//! **Hedges of its own**: with [`Config::hedge`](crate::Config::hedge) in its configuration,
//! it hedges an idempotent request (`GET`, `HEAD`, `OPTIONS`, `PUT`, `DELETE`) whose body it
//! can send again: when no answer came after the delay, a copy goes to the same host through
//! its breaker, and the first good answer is returned (see [`breaker::hedge`](crate::hedge):
//! budgeted, never while the host's breaker refuses; the losing request is dropped). A
//! `POST` or `PATCH` is never hedged (sent twice, it could act twice), nor a streamed body.
//! With both `hedge` and `retry`, idempotent requests are hedged and the others retried: a
//! request hedges or retries, never both (as in gRPC A6).
//!
//! **Hooks**: [`keyed`](CircuitBreakerMiddleware::keyed) picks each request's breaker by a key
//! of your own (authority and path, tenant, …), [`classify`](CircuitBreakerMiddleware::classify)
//! replaces the preset, as on the tower layer.
//!
//! **Keys**: the URL's host and port (`port_or_known_default`), as `"host:port"`
//! (`"[::1]:8080"` for IPv6): two ports of one host are two breakers; the breakers are
//! named `reqwest[host:port]` in errors, events and the registry. A `host:port` longer than
//! 256 bytes (no DNS name is) is kept by a digest of it: its breaker is named
//! `reqwest[{first 16 bytes}…#{32 hex digits}]`, and costs what a short host's does.

use std::fmt::{self, Write as _};

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use breaker_runtime::__internals::{bounded_key, LONGEST_KEY};

use crate::{Breaker, BreakerError, BreakerKey, CallError, Config, KeyedBreaker, Verdict};

/// The name of the middleware's keyed breaker: its breakers are `reqwest[host:port]`.
const NAME: &str = "reqwest";

/// Circuit breakers for a `reqwest` client, one per `host:port` by default; see the [module
/// docs](self). Clones share the breakers.
///
/// `P` picks each request's breaker ([`ByHost`], or what [`keyed`](Self::keyed) was given);
/// `C` judges each attempt (the [`http` preset](crate::http), or what
/// [`classify`](Self::classify) was given).
#[derive(Clone)]
pub struct CircuitBreakerMiddleware<P = ByHost, C = Preset> {
    pick: P,
    classify: C,
}

impl CircuitBreakerMiddleware {
    /// One breaker per `host:port` with the default policy (`Config::default()`).
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    /// One breaker per `host:port` with `config` (its `max_keys` and `idle` bound the hosts
    /// remembered).
    ///
    /// # Panics
    ///
    /// If `config` is invalid, with the [`ConfigError`](crate::ConfigError) message, as
    /// [`Breaker::new`] does.
    pub fn with_config(config: Config) -> Self {
        CircuitBreakerMiddleware {
            pick: ByHost {
                keyed: KeyedBreaker::new(NAME, config),
            },
            classify: Preset,
        }
    }
}

impl<C> CircuitBreakerMiddleware<ByHost, C> {
    /// The breaker of `host_port` (`"example.com:443"`), created if it has none yet: to read
    /// its state or `retry_in`, or to control it by hand.
    pub fn breaker(&self, host_port: &str) -> Breaker {
        self.pick.keyed.breaker(&*bounded_key(host_port))
    }

    /// Every host's breaker, as one keyed breaker (to join it to a fleet, read its size, or
    /// list it).
    pub fn keyed_breaker(&self) -> &KeyedBreaker<String> {
        &self.pick.keyed
    }
}

impl<K: BreakerKey, F> CircuitBreakerMiddleware<ByKey<K, F>> {
    /// Each request goes through the breaker of its key, `key(&request)`, in `keyed`: per
    /// authority and path for an API whose quotas are per path (a 429 on `/search` then
    /// leaves `/items` alone), per tenant from a header, per anything the request carries.
    /// `keyed` brings the policy, the name and the bounds (`max_keys`, `idle`).
    ///
    /// ```
    /// use breaker::{reqwest::CircuitBreakerMiddleware, Config, KeyedBreaker};
    ///
    /// let per_path = KeyedBreaker::<String>::new("api_paths", Config::default().threshold(5));
    /// let middleware = CircuitBreakerMiddleware::keyed(per_path, |req: &reqwest::Request| {
    ///     let url = req.url();
    ///     format!("{}{}", url.host_str().unwrap_or(""), url.path())
    /// });
    /// # let _ = middleware;
    /// ```
    pub fn keyed(keyed: KeyedBreaker<K>, key: F) -> Self
    where
        F: Fn(&Request) -> K,
    {
        CircuitBreakerMiddleware {
            pick: ByKey { keyed, key },
            classify: Preset,
        }
    }
}

impl<K: BreakerKey, F, C> CircuitBreakerMiddleware<ByKey<K, F>, C> {
    /// The keyed breaker the requests go through.
    pub fn keyed_breaker(&self) -> &KeyedBreaker<K> {
        &self.pick.keyed
    }
}

impl<P, C> CircuitBreakerMiddleware<P, C> {
    /// Judges every attempt with `classify` instead of the HTTP preset: any
    /// `Fn(&reqwest_middleware::Result<reqwest::Response>) -> Verdict`. Judging changes what
    /// the breaker counts, never what the caller gets.
    ///
    /// ```
    /// use breaker::{reqwest::CircuitBreakerMiddleware, Verdict};
    ///
    /// // An API that answers 409 when it is overloaded.
    /// let middleware = CircuitBreakerMiddleware::new().classify(
    ///     |r: &reqwest_middleware::Result<reqwest::Response>| match r {
    ///         Ok(answer) if answer.status() == 409 => Verdict::Failure,
    ///         Ok(answer) => breaker::http::verdict(answer.status(), answer.headers()),
    ///         Err(_) => Verdict::Failure,
    ///     },
    /// );
    /// # let _ = middleware;
    /// ```
    pub fn classify<C2>(self, classify: C2) -> CircuitBreakerMiddleware<P, C2>
    where
        C2: Fn(&reqwest_middleware::Result<Response>) -> Verdict,
    {
        CircuitBreakerMiddleware {
            pick: self.pick,
            classify,
        }
    }
}

impl Default for CircuitBreakerMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: fmt::Debug, C> fmt::Debug for CircuitBreakerMiddleware<P, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerMiddleware")
            .field("pick", &self.pick)
            .finish_non_exhaustive()
    }
}

/// Picks a request's breaker: [`ByHost`] (the default) or [`ByKey`].
pub trait PickBreaker: Send + Sync + 'static {
    /// The breaker `req` goes through.
    fn pick(&self, req: &Request) -> Breaker;
}

/// One breaker per `host:port` of the request's URL, named `reqwest[host:port]`.
#[derive(Clone)]
pub struct ByHost {
    keyed: KeyedBreaker<String>,
}

impl PickBreaker for ByHost {
    fn pick(&self, req: &Request) -> Breaker {
        match HostPort::of(req.url()) {
            Some(key) => self.keyed.breaker(key.as_str()),
            // A host name longer than DNS allows (anyone can send one, and it fails only at
            // DNS): kept by a digest of it, as its name shows it, so 10 000 hosts of 60 KB
            // cost what 10 000 short ones do.
            None => self.keyed.breaker(&*bounded_key(&format!(
                "{}:{}",
                req.url().host_str().unwrap_or(""),
                req.url().port_or_known_default().unwrap_or(0)
            ))),
        }
    }
}

impl fmt::Debug for ByHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ByHost")
            .field("hosts", &self.keyed.len())
            .finish()
    }
}

/// One breaker per key a function computes from the request (made by
/// [`CircuitBreakerMiddleware::keyed`]).
#[derive(Clone)]
pub struct ByKey<K, F> {
    keyed: KeyedBreaker<K>,
    key: F,
}

impl<K, F> PickBreaker for ByKey<K, F>
where
    K: BreakerKey + Clone,
    F: Fn(&Request) -> K + Send + Sync + 'static,
{
    fn pick(&self, req: &Request) -> Breaker {
        self.keyed.breaker(&(self.key)(req))
    }
}

impl<K, F> fmt::Debug for ByKey<K, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ByKey")
            .field("keyed", &self.keyed)
            .finish_non_exhaustive()
    }
}

/// The default judge: the [`http` preset](crate::http) over an attempt's answer; no answer
/// (connection refused, reset, timed out) is a failure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Preset;

/// Judges one attempt: [`Preset`], or any
/// `Fn(&reqwest_middleware::Result<reqwest::Response>) -> Verdict`.
pub trait Classify: Send + Sync + 'static {
    /// The verdict on one attempt.
    fn classify(&self, result: &reqwest_middleware::Result<Response>) -> Verdict;
}

impl Classify for Preset {
    fn classify(&self, result: &reqwest_middleware::Result<Response>) -> Verdict {
        match result {
            Ok(answer) => crate::http::verdict(answer.status(), answer.headers()),
            Err(_) => Verdict::Failure,
        }
    }
}

impl<F> Classify for F
where
    F: Fn(&reqwest_middleware::Result<Response>) -> Verdict + Send + Sync + 'static,
{
    fn classify(&self, result: &reqwest_middleware::Result<Response>) -> Verdict {
        self(result)
    }
}

/// A key of host, port and path, `"host:port/path"` (the query left out): for
/// [`CircuitBreakerMiddleware::keyed`], one breaker per path of a host, so a `429` on
/// `/search` leaves `/items` alone. Bound the keys with the keyed breaker's `max_keys` and
/// `idle` when paths carry identifiers.
///
/// ```
/// use breaker::{reqwest::{host_and_path, CircuitBreakerMiddleware}, Config, KeyedBreaker};
///
/// let per_path = KeyedBreaker::<String>::new("docs::per_path", Config::default());
/// let middleware = CircuitBreakerMiddleware::keyed(per_path, host_and_path);
/// # let _ = middleware;
/// let req = reqwest::Request::new(
///     reqwest::Method::GET,
///     "http://api.example.com/search?q=tea".parse().unwrap(),
/// );
/// assert_eq!(host_and_path(&req), "api.example.com:80/search");
/// ```
pub fn host_and_path(req: &Request) -> String {
    let url = req.url();
    format!(
        "{}:{}{}",
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0),
        url.path()
    )
}

/// The breaker's refusal carried by `error`, if that is what it is: an
/// `Error::Middleware` holding a [`BreakerError`], directly or inside `reqwest-retry`'s
/// `RetryError` (which wraps every error that leaves its loop).
///
/// ```
/// use breaker::{reqwest::breaker_error, BreakerError};
///
/// let e = reqwest_middleware::Error::middleware(std::io::Error::other("not a refusal"));
/// assert!(breaker_error(&e).is_none());
/// ```
pub fn breaker_error(error: &reqwest_middleware::Error) -> Option<&BreakerError> {
    let reqwest_middleware::Error::Middleware(error) = error else {
        return None;
    };
    if let Some(refused) = error.downcast_ref::<BreakerError>() {
        return Some(refused);
    }
    match error.downcast_ref::<reqwest_retry::RetryError>()? {
        reqwest_retry::RetryError::WithRetries { err, .. }
        | reqwest_retry::RetryError::Error(err) => breaker_error(err),
    }
}

/// `host:port` written on the stack: finding a known host's breaker allocates nothing. Up to
/// the longest key a name shows whole (a DNS name is at most 253 bytes); a longer one is not
/// written here.
struct HostPort {
    buf: [u8; LONGEST_KEY],
    len: usize,
}

impl HostPort {
    fn of(url: &reqwest::Url) -> Option<HostPort> {
        let mut key = HostPort {
            buf: [0; LONGEST_KEY],
            len: 0,
        };
        let host = url.host_str().unwrap_or("");
        write!(key, "{host}:{}", url.port_or_known_default().unwrap_or(0)).ok()?;
        Some(key)
    }

    fn as_str(&self) -> &str {
        // Only whole `&str`s are ever written, so this never fails.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl fmt::Write for HostPort {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The methods a hedge may send twice: those RFC 9110 calls idempotent, but `TRACE`.
fn hedgeable(method: &reqwest::Method) -> bool {
    use reqwest::Method;
    [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::PUT,
        Method::DELETE,
    ]
    .contains(method)
}

#[async_trait::async_trait]
impl<P: PickBreaker, C: Classify> Middleware for CircuitBreakerMiddleware<P, C> {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let breaker = self.pick.pick(&req);
        let judge = |result: &reqwest_middleware::Result<Response>| self.classify.classify(result);
        // Each attempt a copy of the request, with its own copy of the extensions.
        let attempt = || {
            let (next, mut extensions) = (next.clone(), extensions.clone());
            let req = req.try_clone();
            async move {
                match req {
                    Some(req) => next.run(req, &mut extensions).await,
                    // Checked before any attempt: the same request clones again.
                    None => Err(reqwest_middleware::Error::middleware(
                        std::io::Error::other("the request body cannot be sent again"),
                    )),
                }
            }
        };
        // A body that cannot be sent again (a stream) is sent once. With `Config::hedge`, an
        // idempotent request is hedged (`breaker::hedge`); with `Config::retry`, any other is
        // retried (`breaker::retry`): a request hedges or retries, never both.
        let result =
            if breaker.hedges().is_some() && hedgeable(req.method()) && req.try_clone().is_some() {
                breaker.call_hedged_classified(judge, attempt).await
            } else if breaker.retry_attempts().is_some() && req.try_clone().is_some() {
                breaker.call_retried_classified(judge, attempt).await
            } else {
                breaker
                    .call_classified(judge, next.run(req, extensions))
                    .await
            };
        match result {
            Ok(answer) => Ok(answer),
            Err(CallError::Inner(error)) => Err(error),
            Err(CallError::Breaker(refused)) => Err(reqwest_middleware::Error::Middleware(
                anyhow::Error::new(refused),
            )),
        }
    }
}
