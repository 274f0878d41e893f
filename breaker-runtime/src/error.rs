//! What a call through a breaker can fail with.

use std::{fmt, time::Duration};

use crate::Name;

/// A failure produced by the breaker itself, not by the dependency.
///
/// Building one allocates nothing: it holds the breaker's [`Name`] (a shared, reference-counted
/// string) and plain numbers.
/// A retry loop around a breaker-protected call should treat [`is_open`](Self::is_open) as
/// final and wait [`retry_in`](Self::retry_in) at least.
///
/// ```
/// use breaker::{Breaker, CallError, Config};
///
/// let b = Breaker::new("docs::errors", Config::default());
/// b.handle().force_open();
/// let err = b.call_sync(|| Ok::<u32, std::io::Error>(1)).unwrap_err();
/// match err {
///     CallError::Breaker(e) => {
///         assert!(e.is_open());
///         assert_eq!(e.name(), "docs::errors");
///         assert_eq!(e.retry_in(), None); // forced open: no end in sight
///     }
///     CallError::Inner(_) => unreachable!(),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerError {
    /// The breaker is open (or half-open with every probe slot taken): the call was not made.
    Open {
        /// The breaker's name.
        name: Name,
        /// How long until a call may be admitted again; `None` when forced open.
        retry_in: Option<Duration>,
    },
    /// The call did not finish within the configured `timeout`; it was dropped.
    Timeout {
        /// The breaker's name.
        name: Name,
        /// The configured deadline.
        after: Duration,
    },
    /// The bulkhead is full: `max_concurrent` calls (or, with `adaptive_concurrency`, the
    /// current limit) are already in flight.
    Full {
        /// The breaker's name.
        name: Name,
        /// The limit: the configured one, or the adaptive limit at the time of the call.
        max_concurrent: u32,
    },
    /// Shed while closed, to spare an overloaded dependency: adaptive throttling (`throttle`)
    /// refused this share of the calls, or the breaker is ramping traffic back up after it
    /// closed (`ramp`). The call was not made; calls around it go through.
    Throttled {
        /// The breaker's name.
        name: Name,
    },
}

impl BreakerError {
    pub(crate) fn open(name: &Name, retry_in: Option<Duration>) -> Self {
        BreakerError::Open {
            name: name.clone(),
            retry_in,
        }
    }

    /// The name of the breaker that produced this error.
    pub fn name(&self) -> &str {
        match self {
            BreakerError::Open { name, .. }
            | BreakerError::Timeout { name, .. }
            | BreakerError::Full { name, .. }
            | BreakerError::Throttled { name } => name,
        }
    }

    /// The breaker was open: the dependency was not called.
    pub fn is_open(&self) -> bool {
        matches!(self, BreakerError::Open { .. })
    }

    /// The call timed out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, CallError, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let b = Breaker::new("docs::is_timeout", Config::default().timeout(Duration::from_secs(1)));
    /// let r = b.call(std::future::pending::<Result<(), ()>>()).await;
    /// assert!(matches!(r, Err(CallError::Breaker(e)) if e.is_timeout()));
    /// # }
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, BreakerError::Timeout { .. })
    }

    /// The bulkhead was full: the dependency was not called.
    ///
    /// ```
    /// use breaker::{Breaker, CallError, Config};
    ///
    /// let b = Breaker::new("docs::is_full", Config::default().max_concurrent(1));
    /// // A blocking call holds the only seat while it runs; a call made meanwhile is refused.
    /// let inner = b.call_sync(|| Ok::<_, ()>(b.call_sync(|| Ok::<_, ()>(()))));
    /// assert!(matches!(inner.unwrap(), Err(CallError::Breaker(e)) if e.is_full()));
    /// ```
    pub fn is_full(&self) -> bool {
        matches!(self, BreakerError::Full { .. })
    }

    /// The call was shed by adaptive throttling or a recovery ramp: the dependency was not
    /// called, though the breaker is closed. Unlike [`is_open`](Self::is_open) this is not
    /// final for a retry loop: the next call may well go through, but a retry adds load to
    /// an overloaded dependency, so retry with backoff, or not at all.
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let b = Breaker::new("docs::is_throttled", Config::default().throttle(1.1));
    /// let err = b.call_sync(|| Err::<(), _>("503")).unwrap_err();
    /// assert!(!err.breaker_error().is_some_and(|e| e.is_throttled())); // the dependency's own error
    /// ```
    pub fn is_throttled(&self) -> bool {
        matches!(self, BreakerError::Throttled { .. })
    }

    /// How long until the breaker admits a call again, when it is open and knows: the time
    /// left *when the call was refused*. It is computed then, from the same clock read that
    /// decided the refusal (it costs the refusal one subtraction), so an error kept for
    /// later still says what it said then; subtract the time since from it, or ask the
    /// breaker ([`Handle::snapshot`](crate::Handle::snapshot)`.retry_in`) for the time left now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let b = Breaker::new("docs::error_retry_in", Config::default().threshold(1).cool_off(Duration::from_secs(5)));
    /// let _ = b.call(async { Err::<(), _>("down") }).await;
    /// let refused = b.call(async { Ok::<_, &str>(()) }).await.unwrap_err().into_breaker().unwrap();
    /// assert_eq!(refused.retry_in(), Some(Duration::from_secs(5))); // wait at least this
    /// # }
    /// ```
    pub fn retry_in(&self) -> Option<Duration> {
        match self {
            BreakerError::Open { retry_in, .. } => *retry_in,
            _ => None,
        }
    }
}

/// Formats a duration the way an operator reads it: `250ms`, `4.2s`, `1m 30s`.
pub(crate) struct Human(pub(crate) Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d < Duration::from_secs(1) {
            write!(f, "{}ms", d.as_millis())
        } else if d < Duration::from_secs(60) {
            write!(f, "{:.1}s", d.as_secs_f64())
        } else {
            write!(f, "{}m {}s", d.as_secs() / 60, d.as_secs() % 60)
        }
    }
}

impl fmt::Display for BreakerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BreakerError::Open {
                name,
                retry_in: Some(left),
            } => write!(
                f,
                "circuit breaker `{name}` is open; retry in {}",
                Human(*left)
            ),
            BreakerError::Open {
                name,
                retry_in: None,
            } => write!(
                f,
                "circuit breaker `{name}` is forced open; it stays open until reset"
            ),
            BreakerError::Timeout { name, after } => write!(
                f,
                "call through circuit breaker `{name}` timed out after {}",
                Human(*after)
            ),
            BreakerError::Full {
                name,
                max_concurrent,
            } => write!(
                f,
                "circuit breaker `{name}` is full: {max_concurrent} calls already in flight; retry shortly"
            ),
            BreakerError::Throttled { name } => write!(
                f,
                "circuit breaker `{name}` shed this call to spare an overloaded dependency; retry later, with backoff"
            ),
        }
    }
}

impl std::error::Error for BreakerError {}

/// `io::Result` functions need no fallback: a timeout becomes `TimedOut`, the rest `Other`.
impl From<BreakerError> for std::io::Error {
    fn from(e: BreakerError) -> Self {
        let kind = if e.is_timeout() {
            std::io::ErrorKind::TimedOut
        } else {
            std::io::ErrorKind::Other
        };
        std::io::Error::new(kind, e)
    }
}

/// The outcome of a failed call: the breaker's own refusal, or the dependency's error.
///
/// A fallback receives it and decides, for example: serve a cached value on
/// `Breaker(_)`, surface the dependency's own error on `Inner(e)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError<E> {
    /// The breaker refused or cut the call: open, timed out or bulkhead full.
    Breaker(BreakerError),
    /// The dependency answered with an error of its own.
    Inner(E),
}

impl<E> CallError<E> {
    /// The dependency's error, if that is what this is; `None` for the breaker's own.
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let b = Breaker::new("docs::into_dependency_error", Config::default());
    /// let err = b.call_sync(|| Err::<(), _>("gateway 502")).unwrap_err();
    /// assert_eq!(err.into_dependency_error(), Some("gateway 502"));
    /// ```
    pub fn into_dependency_error(self) -> Option<E> {
        match self {
            CallError::Inner(e) => Some(e),
            CallError::Breaker(_) => None,
        }
    }

    /// The breaker's error, if that is what this is; `None` for the dependency's own.
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let b = Breaker::new("docs::into_breaker", Config::default());
    /// b.handle().force_open();
    /// let err = b.call_sync(|| Ok::<_, ()>(())).unwrap_err();
    /// let refusal = err.into_breaker().unwrap();
    /// assert_eq!(refusal.name(), "docs::into_breaker");
    /// ```
    pub fn into_breaker(self) -> Option<BreakerError> {
        match self {
            CallError::Breaker(e) => Some(e),
            CallError::Inner(_) => None,
        }
    }

    /// The old name of [`into_dependency_error`](Self::into_dependency_error).
    #[deprecated(
        note = "renamed `into_dependency_error`: it returns `None` for the breaker's errors"
    )]
    pub fn into_inner(self) -> Option<E> {
        self.into_dependency_error()
    }

    /// The breaker's error, if that is what this is.
    pub fn breaker_error(&self) -> Option<&BreakerError> {
        match self {
            CallError::Breaker(e) => Some(e),
            CallError::Inner(_) => None,
        }
    }

    /// Whether the breaker was open (the dependency was not called).
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let b = Breaker::new("docs::call_error_is_open", Config::default().threshold(1));
    /// let failed = b.call_sync(|| Err::<(), _>("503")).unwrap_err();
    /// assert!(!failed.is_open()); // the dependency answered: it was called
    /// let refused = b.call_sync(|| Ok::<(), &str>(())).unwrap_err();
    /// assert!(refused.is_open()); // not called: the breaker is open
    /// ```
    pub fn is_open(&self) -> bool {
        self.breaker_error().is_some_and(BreakerError::is_open)
    }

    /// Whether the breaker cut the call at its deadline.
    pub fn is_timeout(&self) -> bool {
        self.breaker_error().is_some_and(BreakerError::is_timeout)
    }

    /// Whether the bulkhead was full (the dependency was not called).
    pub fn is_full(&self) -> bool {
        self.breaker_error().is_some_and(BreakerError::is_full)
    }

    /// Converts into a boxed error: the refusal as a [`BreakerError`], the dependency's own
    /// error boxed. For stacks that want `Box<dyn Error + Send + Sync>`, tower's `BoxError`
    /// and tonic's generated clients among them, when `E` is itself a boxed error: a
    /// `CallError<BoxError>` cannot be an `Error` (Rust's coherence rules: it would overlap
    /// with the impl for every `E: Error`, which keeps `source()` transparent), so
    /// `.map_err(CallError::into_boxed)` once over the layer does it. (Over a tonic
    /// `Channel`, `CircuitBreakerLayer::grpc` returns tonic's boxed error already.)
    ///
    /// ```
    /// use breaker::{Breaker, CallError, Config};
    ///
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// let b = Breaker::new("docs::into_boxed", Config::default());
    /// b.handle().force_open();
    /// let err: CallError<BoxError> = b.call_sync(|| Ok::<(), BoxError>(())).unwrap_err();
    /// let boxed: BoxError = err.into_boxed();
    /// assert!(boxed.downcast_ref::<breaker::BreakerError>().is_some_and(|e| e.is_open()));
    /// ```
    pub fn into_boxed(self) -> Box<dyn std::error::Error + Send + Sync>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        match self {
            CallError::Breaker(e) => Box::new(e),
            CallError::Inner(e) => e.into(),
        }
    }

    /// Converts into `E`, for an error type that can hold a [`BreakerError`].
    pub fn into_error(self) -> E
    where
        E: From<BreakerError>,
    {
        match self {
            CallError::Breaker(e) => E::from(e),
            CallError::Inner(e) => e,
        }
    }
}

impl<E> From<BreakerError> for CallError<E> {
    fn from(e: BreakerError) -> Self {
        CallError::Breaker(e)
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Breaker(e) => e.fmt(f),
            CallError::Inner(e) => e.fmt(f),
        }
    }
}

/// Transparent: `Display` prints the wrapped error's own message, so `source` is that error's
/// source (not the error itself, which a reporter walking the chain would print twice).
impl<E: std::error::Error + 'static> std::error::Error for CallError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Breaker(e) => e.source(),
            CallError::Inner(e) => e.source(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_breaker_and_when_to_retry() {
        let open = BreakerError::open(&"shop::get_tax".into(), Some(Duration::from_millis(4200)));
        assert_eq!(
            open.to_string(),
            "circuit breaker `shop::get_tax` is open; retry in 4.2s"
        );
        let forced = BreakerError::open(&"shop::get_tax".into(), None);
        assert!(forced.to_string().contains("forced open"));
        let timeout = BreakerError::Timeout {
            name: "shop::get_tax".into(),
            after: Duration::from_millis(600),
        };
        assert_eq!(
            timeout.to_string(),
            "call through circuit breaker `shop::get_tax` timed out after 600ms"
        );
        assert_eq!(Human(Duration::from_secs(90)).to_string(), "1m 30s");
    }

    #[test]
    fn io_errors_keep_the_kind() {
        let t: std::io::Error = BreakerError::Timeout {
            name: "x".into(),
            after: Duration::from_secs(1),
        }
        .into();
        assert_eq!(t.kind(), std::io::ErrorKind::TimedOut);
        let o: std::io::Error = BreakerError::open(&"x".into(), None).into();
        assert_eq!(o.kind(), std::io::ErrorKind::Other);
    }

    #[test]
    fn breaker_error_is_send_sync_static() {
        fn check<T: std::error::Error + Send + Sync + Clone + 'static>() {}
        check::<BreakerError>();
        fn send_sync<T: std::error::Error + Send + Sync + 'static>() {}
        send_sync::<CallError<std::io::Error>>();
    }

    #[test]
    fn call_error_is_transparent() {
        use std::error::Error;
        let e: CallError<std::io::Error> = CallError::Inner(std::io::Error::other("boom"));
        assert_eq!(e.to_string(), "boom");
        assert!(
            e.source().is_none(),
            "the message is not repeated down the chain"
        );
        let b: CallError<std::io::Error> =
            CallError::Breaker(BreakerError::open(&"x".into(), None));
        assert!(b.source().is_none());
        assert!(b.is_open() && !b.is_timeout() && !b.is_full());
    }
}
