//! Inherent and trait-impl methods: `&self`, `&mut self`, `self: Arc<Self>`, with and without
//! a fallback (a bare name means a method of `Self`, called with `self` first).
use breaker::{circuit_breaker, CallError};
use std::sync::Arc;

#[derive(Debug)]
struct GatewayError;

struct Gateway {
    calls: u32,
}

impl Gateway {
    #[circuit_breaker(threshold = 2, cool_off = "5s")]
    async fn charge(&self, cents: u64) -> Result<u64, breaker::BreakerError> {
        Ok(cents + u64::from(self.calls))
    }

    #[circuit_breaker(fallback = queued)]
    async fn capture(&self, order: &str, cents: u64) -> Result<String, GatewayError> {
        let _ = cents;
        Ok(format!("{order}: captured"))
    }

    async fn queued(&self, order: &str, cents: u64, err: CallError<GatewayError>) -> Result<String, GatewayError> {
        let _ = (cents, err, self.calls);
        Ok(format!("{order}: queued"))
    }

    #[circuit_breaker(fallback = Self::count_fallback)]
    async fn count(&mut self) -> Result<u32, GatewayError> {
        self.calls += 1;
        Ok(self.calls)
    }

    async fn count_fallback(&mut self, _err: CallError<GatewayError>) -> Result<u32, GatewayError> {
        Ok(self.calls)
    }

    #[circuit_breaker(fallback = refund_later)]
    async fn refund(self: Arc<Self>, cents: u64) -> Result<u64, GatewayError> {
        Ok(cents + u64::from(self.calls))
    }

    async fn refund_later(self: Arc<Self>, cents: u64, _e: CallError<GatewayError>) -> Result<u64, GatewayError> {
        Ok(cents)
    }

    #[circuit_breaker(fallback = |_this: &Self, _e| Ok(0))]
    fn balance(&self) -> Result<u64, GatewayError> {
        Ok(u64::from(self.calls))
    }

    // A bare name would mean `Self::free_fallback`: a free function is named by path.
    #[circuit_breaker(fallback = self::free_fallback)]
    async fn with_free_path(&self, x: u32) -> Result<u32, GatewayError> {
        Ok(x)
    }

    /// An associated function: no receiver, so the fallback path is used as written.
    #[circuit_breaker(fallback = Self::assoc_fallback)]
    fn assoc(x: u32) -> Result<u32, GatewayError> {
        Ok(x)
    }

    fn assoc_fallback(x: u32, _e: CallError<GatewayError>) -> Result<u32, GatewayError> {
        Ok(x)
    }
}

async fn free_fallback(_g: &Gateway, x: u32, _e: CallError<GatewayError>) -> Result<u32, GatewayError> {
    Ok(x)
}

trait Payments {
    async fn pay(&self, cents: u64) -> Result<u64, breaker::BreakerError>;
    fn sync_pay(&self, cents: u64) -> Result<u64, std::io::Error>;
}

impl Payments for Gateway {
    #[circuit_breaker(threshold = 2)]
    async fn pay(&self, cents: u64) -> Result<u64, breaker::BreakerError> {
        Ok(cents)
    }

    #[circuit_breaker(threshold = 2)]
    fn sync_pay(&self, cents: u64) -> Result<u64, std::io::Error> {
        Ok(cents)
    }
}

fn main() {
    let mut g = Gateway { calls: 0 };
    let _ = g.charge(1);
    let _ = g.capture("o", 1);
    let _ = g.count();
    let _ = g.balance();
    let _ = g.with_free_path(1);
    let _ = Gateway::assoc(1);
    let _ = g.pay(1);
    let _ = g.sync_pay(1);
    let _ = Arc::new(g).refund(1);
}
