//! # payment_gateway: a broken deploy, and payments that must not be dropped
//!
//! Checkout charges a payment gateway. The gateway's deploy is broken from t=1s to t=2s: it
//! answers 503. Two failed charges trip the breaker (`threshold = 2`); the third caller does
//! not touch the gateway at all. After the 5-second cool-off a probe succeeds and traffic
//! resumes (seed 000).
//!
//! Failing a payment fast is wrong, though: it must be attempted, or explicitly deferred. So
//! the fallback does not return an error while the gateway is sick: it puts the charge on a
//! queue and tells the shopper "payment queued" (seed 003). Once the breaker has closed again
//! a worker replays the queue through the same breaker. A declined card is the shopper's
//! problem, not the gateway's: `is_failure` makes it neutral (it does not count towards
//! opening) and the fallback lets it surface unchanged. A `max_concurrent = 4` bulkhead keeps
//! a burst from holding more than four gateway connections; the overflow is queued too.
//!
//! Time is tokio's paused clock, so the story's seconds pass instantly and the output is the
//! same on every run:
//!
//! ```text
//! cargo run --example payment_gateway
//! ```
//!
//! (`BREAKER_QUICK=1` is accepted and changes nothing: this example is always quick.)

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use breaker::{circuit_breaker, registry, CallError, State, Transition};
use tokio::time::{sleep, sleep_until, Instant};

const NAME: &str = "payments::charge";

#[derive(Clone, Debug)]
struct Order {
    id: u32,
    cents: u64,
    card: &'static str,
}

#[derive(Debug)]
enum Receipt {
    Charged { reference: String },
    Queued { reason: String },
}

#[derive(Debug, thiserror::Error)]
enum GatewayError {
    #[error("gateway answered 503 unavailable")]
    Unavailable,
    #[error("card {0} declined")]
    Declined(&'static str),
}

/// Only the gateway being sick counts against it; a declined card is neutral.
fn gateway_fault(e: &GatewayError) -> bool {
    matches!(e, GatewayError::Unavailable)
}

// ---- the gateway: broken from t=1s to t=2s, 100 ms per charge --------------------------------

static START: OnceLock<Instant> = OnceLock::new();
static GATEWAY_CALLS: AtomicU32 = AtomicU32::new(0);

fn t() -> f64 {
    START.get().expect("set in main").elapsed().as_secs_f64()
}

async fn gateway_charge(order: &Order) -> Result<String, GatewayError> {
    GATEWAY_CALLS.fetch_add(1, SeqCst);
    sleep(Duration::from_millis(100)).await;
    if (1.0..2.0).contains(&t()) {
        return Err(GatewayError::Unavailable);
    }
    if order.card == "4000-0000-0000-0002" {
        return Err(GatewayError::Declined(order.card));
    }
    Ok(format!("ch_{:04}", order.id))
}

// ---- checkout's side ---------------------------------------------------------------------------

static QUEUE: Mutex<Vec<Order>> = Mutex::new(Vec::new());

#[circuit_breaker(
    threshold = 2,
    cool_off = "5s",
    max_concurrent = 4,
    is_failure = gateway_fault,
    fallback = queue_for_later,
    name = "payments::charge",
    on_state_change = announce
)]
async fn charge(order: &Order) -> Result<Receipt, GatewayError> {
    let reference = gateway_charge(order).await?;
    Ok(Receipt::Charged { reference })
}

/// The gateway could not take the charge (it failed, the breaker is open, or the bulkhead is
/// full): defer it. A declined card goes back to the shopper as it is.
async fn queue_for_later(
    order: &Order,
    err: CallError<GatewayError>,
) -> Result<Receipt, GatewayError> {
    let reason = match err {
        CallError::Inner(GatewayError::Declined(card)) => return Err(GatewayError::Declined(card)),
        CallError::Inner(e) => e.to_string(),
        CallError::Breaker(e) => e.to_string(),
    };
    QUEUE.lock().unwrap().push(order.clone());
    Ok(Receipt::Queued { reason })
}

fn announce(tr: &Transition) {
    println!(
        "          [breaker] t={:.2}s {} -> {} ({})",
        t(),
        tr.from,
        tr.to,
        tr.cause
    );
}

fn state() -> State {
    registry().get(NAME).map_or(State::Closed, |h| h.state())
}

async fn checkout(order: Order) {
    let before = GATEWAY_CALLS.load(SeqCst);
    let started = Instant::now();
    let result = charge(&order).await;
    let touched = if GATEWAY_CALLS.load(SeqCst) > before {
        "gateway called"
    } else {
        "gateway NOT called"
    };
    let what = match result {
        Ok(Receipt::Charged { reference }) => format!("charged, {reference}"),
        Ok(Receipt::Queued { reason }) => format!("QUEUED for later: {reason}"),
        Err(e) => format!("error to shopper: {e}"),
    };
    println!(
        "t={:.2}s  order #{:<3} ${:>6.2}  {:<18} after {:>5.0?}  -> {what}",
        t(),
        order.id,
        order.cents as f64 / 100.0,
        touched,
        started.elapsed(),
    );
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let start = Instant::now();
    START.set(start).expect("set once");
    let at = |secs: f64| start + Duration::from_secs_f64(secs);
    let order = |id, cents| Order {
        id,
        cents,
        card: "4242-4242-4242-4242",
    };

    println!("payment gateway: broken from t=1s to t=2s; breaker threshold 2, cool-off 5s\n");
    checkout(order(1, 500)).await; // t=0: healthy
    checkout(Order {
        card: "4000-0000-0000-0002",
        ..order(2, 1_250)
    })
    .await; // declined: neutral, surfaces to the shopper

    sleep_until(at(1.0)).await; // the broken deploy
    checkout(order(3, 500)).await; // 503, failure 1 -> queued
    checkout(order(4, 500)).await; // 503, failure 2 -> opens -> queued
    checkout(order(5, 800)).await; // open: the gateway is not touched -> queued

    sleep_until(at(2.5)).await; // the gateway is fixed, but the breaker is still open
    checkout(order(6, 300)).await;
    println!(
        "          state {}, probe allowed in {:.1?}",
        state(),
        registry()
            .get(NAME)
            .and_then(|h| h.retry_in())
            .unwrap_or_default()
    );

    sleep_until(at(6.5)).await; // the cool-off (5 s from t=1.2) is over
    checkout(order(7, 900)).await; // the probe: succeeds, closes

    // Replay the queue through the same breaker, now that it is closed.
    let queued: Vec<Order> = std::mem::take(&mut *QUEUE.lock().unwrap());
    println!("\nreplaying {} queued payments:", queued.len());
    for o in queued {
        checkout(o).await;
    }

    // A burst of eight charges at once: the bulkhead admits four, queues the rest.
    sleep_until(at(8.0)).await;
    println!("\na burst of 8 concurrent charges (max_concurrent = 4):");
    let burst: Vec<_> = (20..28)
        .map(|id| tokio::spawn(checkout(order(id, 100))))
        .collect();
    for b in burst {
        b.await.expect("no panic");
    }
    let overflow: Vec<Order> = std::mem::take(&mut *QUEUE.lock().unwrap());
    println!(
        "replaying the {} charges the bulkhead turned away:",
        overflow.len()
    );
    for o in overflow {
        checkout(o).await;
    }

    let stats = registry().get(NAME).expect("created").stats();
    println!(
        "\ngateway calls: {}; breaker stats: {} calls, {} successes, {} failures, {} rejected; state {}",
        GATEWAY_CALLS.load(SeqCst),
        stats.calls,
        stats.successes,
        stats.failures,
        stats.rejected,
        state()
    );
    assert_eq!(state(), State::Closed, "the breaker closes after the probe");
    assert!(
        QUEUE.lock().unwrap().is_empty(),
        "every queued payment was replayed"
    );
}
