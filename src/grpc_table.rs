//! The gRPC table on a code's number, without tonic (feature `http`): what
//! `breaker::grpc` judges by, and what the plain tower layer reads from the
//! headers of an answer whose `content-type` is `application/grpc…`, so that a tonic
//! `Channel` behind `CircuitBreakerLayer::new` is judged as a gRPC answer whether or not the
//! `grpc` feature is on.

use std::time::Duration;

use http::{HeaderMap, StatusCode};

use crate::Verdict;

pub(crate) const GRPC_STATUS: &str = "grpc-status";
pub(crate) const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// `OK`.
pub(crate) const OK: i32 = 0;
/// `UNKNOWN`: what a code that cannot be read is.
pub(crate) const UNKNOWN: i32 = 2;

/// Whether an answer is a gRPC one: `content-type: application/grpc`, `application/grpc+proto`,
/// `application/grpc-web…` (the gRPC and gRPC-Web specifications' forms).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

/// The table (the `breaker::grpc` module docs): the verdict on `code`, with the pushback read
/// only for an answer that is not `OK`.
pub(crate) fn judge(code: i32, pushback: impl FnOnce() -> Option<Duration>) -> Verdict {
    if code != OK {
        match pushback() {
            // A pushback of 0 says "now is fine": one failure, not an opening.
            Some(Duration::ZERO) => return Verdict::Failure,
            Some(wait) => return Verdict::OpenFor(wait),
            None => {}
        }
    }
    match code {
        OK => Verdict::Success,
        // CANCELLED, INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
        // FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED, UNAUTHENTICATED: the caller's doing.
        1 | 3 | 5 | 6 | 7 | 9 | 11 | 12 | 16 => Verdict::Neutral,
        // UNKNOWN, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE,
        // DATA_LOSS, and any number gRPC does not define (read as UNKNOWN).
        _ => Verdict::Failure,
    }
}

/// `grpc-retry-pushback-ms` when it is a whole number of milliseconds ≥ 0; gRPC A6 reads a
/// negative or malformed value as "do not retry", which says nothing about how long, so it
/// is ignored here.
pub(crate) fn pushback(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Saturating: twenty digits of nines is "a long time"; the engine caps an `OpenFor`.
    let millis = text.bytes().fold(0u64, |ms, digit| {
        ms.saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    });
    Some(Duration::from_millis(millis))
}

/// The pushback in `metadata`, if any.
pub(crate) fn pushback_in(metadata: &HeaderMap) -> Option<Duration> {
    pushback(metadata.get(PUSHBACK)?.to_str().ok()?)
}

/// The code in an answer's headers or trailers, when they carry one (`UNKNOWN` when it is
/// not a number, as tonic reads it).
pub(crate) fn code_in(headers: &HeaderMap) -> Option<i32> {
    // One or two digits, as tonic's `Code::from_bytes` reads them.
    let code = match *headers.get(GRPC_STATUS)?.as_bytes() {
        [d] if d.is_ascii_digit() => i32::from(d - b'0'),
        [t, d] if t.is_ascii_digit() && d.is_ascii_digit() => {
            i32::from(t - b'0') * 10 + i32::from(d - b'0')
        }
        _ => UNKNOWN,
    };
    Some(if code <= 16 { code } else { UNKNOWN })
}

/// The code tonic's client gives an answer without `grpc-status` in its headers, when the
/// HTTP status alone decides it (gRPC's HTTP-to-gRPC mapping); `None` for a `200`, whose
/// code comes in the trailers.
pub(crate) fn code_of_http(status: StatusCode) -> Option<i32> {
    Some(match status {
        StatusCode::OK => return None,
        StatusCode::BAD_REQUEST => 13,  // INTERNAL
        StatusCode::UNAUTHORIZED => 16, // UNAUTHENTICATED
        StatusCode::FORBIDDEN => 7,     // PERMISSION_DENIED
        StatusCode::NOT_FOUND => 12,    // UNIMPLEMENTED
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => 14, // UNAVAILABLE
        _ => UNKNOWN,
    })
}

/// A gRPC answer judged by its headers alone, as the plain tower layer sees it (its response
/// future ends at the headers): the code of a Trailers-Only answer, or the HTTP status by
/// gRPC's mapping; a `200` without a code (its code comes in the trailers, after the layer's
/// call ended) is a success there. `CircuitBreakerLayer::grpc` reads the trailers too.
pub(crate) fn at_headers(status: StatusCode, headers: &HeaderMap) -> Verdict {
    match code_in(headers).or_else(|| code_of_http(status)) {
        Some(code) => judge(code, || pushback_in(headers)),
        None => Verdict::Success,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn grpc(code: Option<&'static str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        if let Some(code) = code {
            headers.insert(GRPC_STATUS, HeaderValue::from_static(code));
        }
        headers
    }

    #[test]
    fn headers_alone() {
        assert!(is_grpc(&grpc(None)));
        assert!(!is_grpc(&HeaderMap::new()));
        assert_eq!(at_headers(StatusCode::OK, &grpc(None)), Verdict::Success);
        assert_eq!(
            at_headers(StatusCode::OK, &grpc(Some("14"))),
            Verdict::Failure
        );
        assert_eq!(
            at_headers(StatusCode::OK, &grpc(Some("5"))),
            Verdict::Neutral
        );
        assert_eq!(
            at_headers(StatusCode::OK, &grpc(Some("junk"))),
            Verdict::Failure
        );
        assert_eq!(
            at_headers(StatusCode::OK, &grpc(Some("99"))),
            Verdict::Failure
        );
        assert_eq!(
            at_headers(StatusCode::NOT_FOUND, &grpc(None)),
            Verdict::Neutral
        );
        assert_eq!(
            at_headers(StatusCode::BAD_GATEWAY, &grpc(None)),
            Verdict::Failure
        );
    }
}
