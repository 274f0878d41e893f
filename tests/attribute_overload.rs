//! The overload keys through `#[circuit_breaker]`: a throttled call goes to the fallback with
//! `BreakerError::Throttled`, and a dry run makes every call without calling the fallback for
//! the refusals it pretends. Paused time; nothing is timed.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

use breaker::{circuit_breaker, registry, CallError, State};

// An inventory service past its capacity: nine calls in ten answer 503.
mod inventory {
    use super::*;

    pub static REACHED: AtomicU32 = AtomicU32::new(0);
    pub static SHED: AtomicU32 = AtomicU32::new(0);

    #[circuit_breaker(name = "overload::inventory", threshold = 1_000_000, throttle = 2, fallback = shed)]
    pub async fn stock(item: u32) -> Result<u32, String> {
        let n = REACHED.fetch_add(1, SeqCst);
        if n.is_multiple_of(10) {
            Ok(item)
        } else {
            Err("503 overloaded".into())
        }
    }

    async fn shed(_item: u32, err: CallError<String>) -> Result<u32, String> {
        match err {
            CallError::Breaker(e) if e.is_throttled() => {
                SHED.fetch_add(1, SeqCst);
                Err(e.to_string())
            }
            CallError::Breaker(e) => Err(e.to_string()),
            CallError::Inner(e) => Err(e),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_overloaded_dependency_is_spared_the_calls_it_would_refuse() {
    for i in 0..2_000 {
        let _ = inventory::stock(i).await;
    }
    let reached = inventory::REACHED.load(SeqCst);
    let shed = inventory::SHED.load(SeqCst);
    assert_eq!(reached + shed, 2_000, "every call reached it or was shed");
    // It accepts one call in ten; with K = 2 the client sends about twice what it accepts
    // (the cap of 90 % never binds here), so most of the 2 000 are shed.
    assert!(shed > 1_200, "shed {shed}, reached {reached}");
    let h = registry().get("overload::inventory").unwrap();
    assert_eq!(h.stats().throttled, u64::from(shed));
    assert_eq!(h.state(), State::Closed);
}

// A fraud vendor's new thresholds, tried on production traffic first.
mod fraud {
    use super::*;

    pub static FALLBACKS: AtomicU32 = AtomicU32::new(0);
    pub static DOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

    #[circuit_breaker(name = "overload::fraud", threshold = 2, cool_off = "30s", dry_run = true, fallback = allow)]
    pub async fn score(order: u32) -> Result<u32, String> {
        if DOWN.load(SeqCst) {
            Err("vendor timeout".into())
        } else {
            Ok(order % 100)
        }
    }

    async fn allow(_order: u32, _err: CallError<String>) -> Result<u32, String> {
        FALLBACKS.fetch_add(1, SeqCst);
        Ok(0)
    }
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_opens_on_paper_and_still_calls_the_vendor() {
    for order in 0..2 {
        assert_eq!(
            fraud::score(order).await,
            Ok(0),
            "failures go to the fallback"
        );
    }
    let h = registry().get("overload::fraud").unwrap();
    assert_eq!(h.state(), State::Open, "it would have opened");
    fraud::DOWN.store(false, SeqCst);
    for order in 100..110 {
        assert_eq!(
            fraud::score(order).await,
            Ok(order % 100),
            "a pretended refusal is a real call"
        );
    }
    assert_eq!(
        fraud::FALLBACKS.load(SeqCst),
        2,
        "no fallback for the pretended refusals"
    );
    assert_eq!(h.stats().shadow_rejected, 10);
}
