//! Judging HTTP answers (feature `http`): the `Retry-After` header and the status preset.
//!
//! An HTTP client returns `Ok(response)` for a 503 as much as for a 200, so a breaker that
//! counts only `Err` never opens on a sick server. [`verdict`] judges an answer by its status
//! and headers, and [`classify`] applies it to a whole `Result<http::Response<B>, E>`, ready
//! for [`Breaker::call_classified`](crate::Breaker::call_classified):
//!
//! | status | [`Verdict`] | why |
//! | --- | --- | --- |
//! | 1xx, 2xx, 3xx | `Success` | the server answered |
//! | 429 Too Many Requests with `Retry-After` | `OpenFor(Retry-After)` | the server said how long to stay away |
//! | 429 or 503 with `Retry-After: 0` (or a date already past) | `Failure` | "now is fine": one failure, and a retry may follow |
//! | 429 without (or with a junk) `Retry-After` | `Failure` | one failure toward the trip rules: a quota on one path or one caller is no outage of the host |
//! | 503 with `Retry-After` | `OpenFor(Retry-After)` | the server said for how long it is down |
//! | 503 without, 500, 502, 504, other 5xx, 408 | `Failure` | the dependency is failing (408: it was too slow to read us) |
//! | other 4xx | `Neutral` | the caller's fault (a 404, a 400): counts for nothing |
//! | 600..=999 (not HTTP) | `Failure` | whatever answered is not a well-behaved server |
//!
//! An `OpenFor` verdict opens the breaker at once for exactly that long, shorter than
//! `cool_off` or not, capped by the engine at `max_cool_off` (5 minutes when unset: one
//! answer, which anyone in the path can forge, never parks a host for longer);
//! `retry_in` and the `BreakerError::Open` of refused calls report it. The `Ok` still reaches the caller as it
//! is: judging changes what the breaker counts, never what the caller gets.
//!
//! ```
//! use std::time::Duration;
//! use breaker::{http::verdict, Verdict};
//! use http::{header::RETRY_AFTER, HeaderMap, HeaderValue, StatusCode};
//!
//! let mut headers = HeaderMap::new();
//! assert_eq!(verdict(StatusCode::OK, &headers), Verdict::Success);
//! assert_eq!(verdict(StatusCode::NOT_FOUND, &headers), Verdict::Neutral);
//! assert_eq!(verdict(StatusCode::SERVICE_UNAVAILABLE, &headers), Verdict::Failure);
//! assert_eq!(verdict(StatusCode::TOO_MANY_REQUESTS, &headers), Verdict::Failure);
//!
//! headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
//! assert_eq!(
//!     verdict(StatusCode::SERVICE_UNAVAILABLE, &headers),
//!     Verdict::OpenFor(Duration::from_secs(3)),
//! );
//! ```

use std::time::{Duration, SystemTime};

use http::{header::RETRY_AFTER, HeaderMap, StatusCode};

use crate::Verdict;

/// The longest wait [`retry_after`] reports: one day. A `Retry-After` of years is a
/// misconfigured server, not a plan; the breaker caps an `OpenFor` further anyway (at
/// `max_cool_off`, else 5 minutes).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// How long the server asked us to wait, from its `Retry-After` header
/// ([RFC 9110 §10.2.3](https://www.rfc-editor.org/rfc/rfc9110#field.retry-after)).
///
/// - delta-seconds (`Retry-After: 120`): that many seconds;
/// - an HTTP-date in any of its three forms (`Retry-After: Wed, 21 Oct 2015 07:28:00 GMT`):
///   the time from now (the system clock) until then, zero when it is already past;
/// - values longer than [`MAX_RETRY_AFTER`] are clamped to it;
/// - no header, an empty one, or anything else (negative or fractional numbers, junk bytes,
///   impossible dates): `None`. It never panics. With several `Retry-After` headers the
///   first counts.
///
/// ```
/// use std::time::Duration;
/// use breaker::http::retry_after;
/// use http::{header::RETRY_AFTER, HeaderMap, HeaderValue};
///
/// let mut headers = HeaderMap::new();
/// assert_eq!(retry_after(&headers), None);
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("120"));
/// assert_eq!(retry_after(&headers), Some(Duration::from_secs(120)));
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"));
/// assert_eq!(retry_after(&headers), Some(Duration::ZERO)); // in the past
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
/// assert_eq!(retry_after(&headers), None);
/// ```
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, SystemTime::now())
}

/// [`retry_after`] with `now` given, so tests can pin the clock.
fn retry_after_at(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        // Saturating, so twenty digits of nines is "a long time", not an overflow.
        let secs = text.bytes().fold(0u64, |secs, digit| {
            secs.saturating_mul(10)
                .saturating_add(u64::from(digit - b'0'))
        });
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    let date = httpdate::parse_http_date(text).ok()?;
    Some(
        date.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER),
    )
}

/// A key of authority and path, `"{authority}{path}"` (`"api.example.com/search"`): one
/// breaker per path of a host, for an API whose quotas or failures are per path, so a `429`
/// or a broken `/search` leaves `/items` alone. The query is left out. For the tower
/// layer: `CircuitBreakerLayer::keyed(per_path, |req: &http::Request<B>|
/// breaker::http::authority_and_path(req.uri()))`; the reqwest middleware has its own,
/// [`host_and_path`](crate::reqwest::host_and_path) (with the `reqwest` feature).
///
/// Paths with identifiers in them (`/items/123`) make a key per identifier: bound them
/// with the keyed breaker's `max_keys` and `idle`, or key by a route template instead.
///
/// ```
/// let uri: http::Uri = "https://api.example.com:8443/search?q=tea".parse().unwrap();
/// assert_eq!(breaker::http::authority_and_path(&uri), "api.example.com:8443/search");
/// ```
pub fn authority_and_path(uri: &http::Uri) -> String {
    let authority = uri.authority().map_or("", |a| a.as_str());
    format!("{authority}{}", uri.path())
}

/// The preset verdict on an HTTP answer (the table in the [module docs](self)).
///
/// 429 and 503 with a `Retry-After` open the breaker for the time the server asked
/// ([`retry_after`]), exactly, even when shorter than the breaker's `cool_off`. Without
/// one, both are a failure toward the trip rules: a 429 is usually a quota (per path, per
/// caller), not an outage of the host, so one of them does not open the breaker on its own.
pub fn verdict(status: StatusCode, headers: &HeaderMap) -> Verdict {
    match status.as_u16() {
        // `Retry-After: 0` (or a date already past) says "now is fine": one failure, not
        // an opening for the cool-off.
        429 | 503 => match retry_after(headers) {
            Some(wait) if !wait.is_zero() => Verdict::OpenFor(wait),
            _ => Verdict::Failure,
        },
        408 => Verdict::Failure,
        100..=399 => Verdict::Success,
        400..=499 => Verdict::Neutral,
        _ => Verdict::Failure,
    }
}

/// The preset over a whole call: an `Ok(response)` is judged by [`verdict`], an `Err` (the
/// connection failed, no answer) is a failure. A classifier for
/// [`Breaker::call_classified`](crate::Breaker::call_classified) and for the tower layer.
///
/// ```
/// use breaker::{http::classify, Verdict};
///
/// let answer: Result<http::Response<()>, std::io::Error> =
///     Ok(http::Response::builder().status(502).body(()).unwrap());
/// assert_eq!(classify(&answer), Verdict::Failure);
/// ```
pub fn classify<B, E>(result: &Result<http::Response<B>, E>) -> Verdict {
    match result {
        Ok(response) => verdict(response.status(), response.headers()),
        Err(_) => Verdict::Failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;
    use std::time::UNIX_EPOCH;

    fn with(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        headers
    }

    /// A fixed "now" with whole seconds, as HTTP-dates have: 2026-11-30T14:00:00Z.
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_796_047_200)
    }

    #[test]
    fn the_three_date_forms() {
        let at = |s| retry_after_at(&with(s), UNIX_EPOCH + Duration::from_secs(784_111_770));
        // RFC 9110's example date, 1994-11-06T08:49:37Z, seen 7 s before it.
        assert_eq!(
            at("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            at("Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(Duration::from_secs(7))
        );
        assert_eq!(at("Sun Nov  6 08:49:37 1994"), Some(Duration::from_secs(7)));
    }

    #[test]
    fn junk_and_edges() {
        let at = |s| retry_after_at(&with(s), now());
        assert_eq!(at("0"), Some(Duration::ZERO));
        assert_eq!(at(" 5 "), Some(Duration::from_secs(5)));
        assert_eq!(at("99999999999999999999999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(at(""), None);
        assert_eq!(at("-5"), None);
        assert_eq!(at("+5"), None);
        assert_eq!(at("1.5"), None);
        assert_eq!(at("5s"), None);
        assert_eq!(at("Fri, 31 Dec 9999 23:59:59 GMT"), Some(MAX_RETRY_AFTER));
        assert_eq!(at("Sun, 32 Nov 1994 08:49:37 GMT"), None);
        let mut bytes = HeaderMap::new();
        bytes.insert(RETRY_AFTER, HeaderValue::from_bytes(b"\xff\xfe3").unwrap());
        assert_eq!(retry_after_at(&bytes, now()), None);
    }

    #[test]
    fn first_header_counts() {
        let mut headers = with("7");
        headers.append(RETRY_AFTER, HeaderValue::from_static("9"));
        assert_eq!(
            retry_after_at(&headers, now()),
            Some(Duration::from_secs(7))
        );
    }

    proptest! {
        /// A date formatted `secs` ahead of now reads back as exactly `secs`; one behind
        /// reads as zero.
        #[test]
        fn formatted_dates_round_trip(secs in 0u64..(3 * 86_400)) {
            let ahead = httpdate::fmt_http_date(now() + Duration::from_secs(secs));
            prop_assert_eq!(
                retry_after_at(&with(&ahead), now()),
                Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
            );
            let behind = httpdate::fmt_http_date(now() - Duration::from_secs(secs));
            prop_assert_eq!(retry_after_at(&with(&behind), now()), Some(Duration::ZERO));
        }

        #[test]
        fn delta_seconds_round_trip(secs: u64) {
            prop_assert_eq!(
                retry_after_at(&with(&secs.to_string()), now()),
                Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
            );
        }
    }
}
