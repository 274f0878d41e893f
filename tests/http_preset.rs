//! The `http` preset: `breaker::http::{retry_after, verdict, classify}` through the public API.
#![cfg(feature = "http")]

use std::time::{Duration, SystemTime};

use breaker::{
    http::{classify, retry_after, verdict, MAX_RETRY_AFTER},
    Verdict,
};
use http::{header::RETRY_AFTER, HeaderMap, HeaderValue, StatusCode};
use proptest::prelude::*;

fn headers(retry: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Some(v) = retry {
        h.insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
    }
    h
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap()
}

#[test]
fn every_status_class() {
    let none = headers(None);
    for code in [100, 101, 200, 201, 204, 301, 304, 399] {
        assert_eq!(verdict(status(code), &none), Verdict::Success, "{code}");
    }
    for code in [400, 401, 403, 404, 409, 422, 499] {
        assert_eq!(verdict(status(code), &none), Verdict::Neutral, "{code}");
    }
    for code in [408, 500, 501, 502, 503, 504, 599, 600, 999] {
        assert_eq!(verdict(status(code), &none), Verdict::Failure, "{code}");
    }
    // Part four: a 429 without Retry-After is a quota, not an outage: one failure.
    assert_eq!(verdict(status(429), &none), Verdict::Failure);
}

#[test]
fn retry_after_opens_for_429_and_503_only() {
    let three = headers(Some("3"));
    let open3 = Verdict::OpenFor(Duration::from_secs(3));
    assert_eq!(verdict(status(429), &three), open3);
    assert_eq!(verdict(status(503), &three), open3);
    // Other answers ignore the header: a 500 with Retry-After is still a plain failure.
    assert_eq!(verdict(status(500), &three), Verdict::Failure);
    assert_eq!(verdict(status(200), &three), Verdict::Success);
    assert_eq!(verdict(status(404), &three), Verdict::Neutral);
    // A 429 or 503 whose Retry-After is junk is a plain failure.
    let junk = headers(Some("later"));
    assert_eq!(verdict(status(503), &junk), Verdict::Failure);
    assert_eq!(verdict(status(429), &junk), Verdict::Failure);
}

#[test]
fn dates_in_the_past_are_zero_and_far_dates_are_clamped() {
    let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(3600));
    assert_eq!(retry_after(&headers(Some(&past))), Some(Duration::ZERO));
    let far = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(400 * 86_400));
    assert_eq!(retry_after(&headers(Some(&far))), Some(MAX_RETRY_AFTER));
    // "Now is fine": one failure, not an opening for the cool-off (issue 40).
    assert_eq!(
        verdict(status(503), &headers(Some(&past))),
        Verdict::Failure
    );
    assert_eq!(verdict(status(429), &headers(Some("0"))), Verdict::Failure);
}

#[test]
fn classify_judges_results() {
    let ok = |code: u16| -> Result<http::Response<()>, std::io::Error> {
        Ok(http::Response::builder().status(code).body(()).unwrap())
    };
    assert_eq!(classify(&ok(200)), Verdict::Success);
    assert_eq!(classify(&ok(503)), Verdict::Failure);
    assert_eq!(classify(&ok(404)), Verdict::Neutral);
    let refused: Result<http::Response<()>, _> = Err(std::io::Error::other("refused"));
    assert_eq!(classify(&refused), Verdict::Failure);
}

proptest! {
    /// Whatever bytes a server puts in `Retry-After`, the preset answers without panicking,
    /// and never more than the clamp.
    #[test]
    fn never_panics_on_random_header_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
        code in 100u16..1000,
    ) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            let mut h = HeaderMap::new();
            h.insert(RETRY_AFTER, value);
            if let Some(wait) = retry_after(&h) {
                prop_assert!(wait <= MAX_RETRY_AFTER);
            }
            let _ = verdict(status(code), &h);
        }
    }

    /// Strings shaped like dates and numbers (the near misses random bytes rarely hit).
    #[test]
    fn never_panics_on_date_shaped_junk(
        text in "[A-Za-z]{3}, [0-9]{1,3} [A-Za-z]{3} [0-9]{1,5} [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2} [A-Z]{3}|[0-9]{0,30}|[A-Za-z]{3} [A-Za-z]{3} [0-9 ]{1,3} [0-9:]{0,8} [0-9]{1,5}",
    ) {
        if let Some(wait) = retry_after(&headers(Some(&text))) {
            prop_assert!(wait <= MAX_RETRY_AFTER);
        }
    }

}
