//! A refusal as a gRPC status (feature `grpc`): what a tonic caller sees when the breaker
//! says no. gRPC's retry machinery understands `UNAVAILABLE` and `DEADLINE_EXCEEDED`, and
//! `grpc-retry-pushback-ms` (gRPC A6); `UNKNOWN`, what tonic makes of any other error, tells
//! a caller nothing.

use tonic::{metadata::MetadataValue, Status};

use crate::BreakerError;

/// The metadata key of gRPC A6's pushback: how long a client should wait before trying again.
const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// `UNAVAILABLE` for a call the breaker did not make (open, throttled, bulkhead full), with
/// `grpc-retry-pushback-ms` set to `retry_in` when the breaker knows it; `DEADLINE_EXCEEDED`
/// for a call cut at the breaker's `timeout`. The message is the refusal's own
/// (``circuit breaker `shop::tax` is open; retry in 4.2s``).
///
/// ```
/// use std::time::Duration;
/// use breaker::{Breaker, Config};
///
/// let b = Breaker::new("docs::grpc_status", Config::default().threshold(1));
/// let _ = b.call_sync(|| Err::<(), _>("boom"));
/// let refused = b.call_sync(|| Ok::<(), &str>(())).unwrap_err().into_breaker().unwrap();
/// let status = tonic::Status::from(refused);
/// assert_eq!(status.code(), tonic::Code::Unavailable);
/// assert!(status.metadata().get("grpc-retry-pushback-ms").is_some());
/// ```
impl From<BreakerError> for Status {
    fn from(refusal: BreakerError) -> Status {
        let message = refusal.to_string();
        match refusal {
            BreakerError::Timeout { .. } => Status::deadline_exceeded(message),
            BreakerError::Open {
                retry_in: Some(wait),
                ..
            } => {
                let mut status = Status::unavailable(message);
                let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                status
                    .metadata_mut()
                    .insert(PUSHBACK, MetadataValue::from(millis));
                status
            }
            BreakerError::Open { .. }
            | BreakerError::Full { .. }
            | BreakerError::Throttled { .. } => Status::unavailable(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tonic::Code;

    use super::*;

    #[test]
    fn each_refusal_has_its_code() {
        let name = crate::Name::from("svc");
        let open = Status::from(BreakerError::open(&name, Some(Duration::from_millis(1500))));
        assert_eq!(open.code(), Code::Unavailable);
        assert_eq!(open.metadata().get(PUSHBACK).unwrap(), "1500");
        assert!(open.message().contains("`svc` is open"));

        let forced = Status::from(BreakerError::open(&name, None));
        assert_eq!(forced.code(), Code::Unavailable);
        assert!(forced.metadata().get(PUSHBACK).is_none());

        let timeout = Status::from(BreakerError::Timeout {
            name: name.clone(),
            after: Duration::from_millis(600),
        });
        assert_eq!(timeout.code(), Code::DeadlineExceeded);

        let full = Status::from(BreakerError::Full {
            name: name.clone(),
            max_concurrent: 4,
        });
        assert_eq!(full.code(), Code::Unavailable);
        let throttled = Status::from(BreakerError::Throttled { name });
        assert_eq!(throttled.code(), Code::Unavailable);
    }
}
