//! The seeds' three incidents, played through the runtime API on paused time.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use breaker_runtime::{Breaker, CallError, Config, State};
use tokio::time::{advance, Instant};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// Seed 000: the payment gateway's deploy is broken from t=1 s to t=2 s. Two failed charges
/// trip the breaker; the third caller fails at once without touching the gateway; after the
/// five-second cool-off a probe succeeds and traffic resumes.
#[tokio::test(start_paused = true)]
async fn payment_gateway_broken_deploy() {
    let start = Instant::now();
    let charged = Arc::new(AtomicUsize::new(0));
    let gateway = |amount: u32| {
        let charged = charged.clone();
        async move {
            charged.fetch_add(1, SeqCst);
            let t = start.elapsed();
            if t >= SEC && t < 2 * SEC {
                Err(format!("gateway 500 while charging {amount}"))
            } else {
                Ok(amount)
            }
        }
    };
    let payments = Breaker::new(
        "story::payment_gateway",
        Config::default().threshold(2).cool_off(5 * SEC),
    );

    assert_eq!(payments.call(gateway(100)).await, Ok(100));
    advance(SEC).await; // t = 1 s: the broken deploy
    assert!(matches!(
        payments.call(gateway(200)).await,
        Err(CallError::Inner(_))
    ));
    advance(100 * MS).await;
    assert!(matches!(
        payments.call(gateway(300)).await,
        Err(CallError::Inner(_))
    ));
    assert_eq!(payments.state(), State::Open);

    advance(100 * MS).await;
    let third = payments.call(gateway(400)).await.unwrap_err();
    assert!(third.is_open());
    assert_eq!(
        charged.load(SeqCst),
        3,
        "the third caller never reached the gateway"
    );

    advance(6 * SEC).await; // t = 7.2 s: deploy fixed, cool-off over
    assert_eq!(
        payments.call(gateway(500)).await,
        Ok(500),
        "the probe succeeds"
    );
    assert_eq!(payments.state(), State::Closed);
    assert_eq!(payments.call(gateway(600)).await, Ok(600));
    assert_eq!(charged.load(SeqCst), 5);
}

/// Seed 001: the tax service did not go down, it got slow (p99 of 25 s). A 600 ms timeout
/// turns slowness into failures, five of them trip the breaker, rejections cost no time,
/// and when a hundred callers arrive together after the cool-off exactly one probes.
#[tokio::test(start_paused = true)]
async fn tax_service_gets_slow() {
    let latency = Arc::new(std::sync::Mutex::new(40 * MS));
    let reached = Arc::new(AtomicUsize::new(0));
    let tax_api = {
        let (latency, reached) = (latency.clone(), reached.clone());
        move || {
            let (latency, reached) = (latency.clone(), reached.clone());
            async move {
                reached.fetch_add(1, SeqCst);
                let wait = *latency.lock().unwrap();
                tokio::time::sleep(wait).await;
                Ok::<f64, String>(0.0725)
            }
        }
    };
    let tax = Arc::new(Breaker::new(
        "story::tax",
        Config::default()
            .threshold(5)
            .cool_off(10 * SEC)
            .timeout(600 * MS),
    ));

    assert_eq!(tax.call(tax_api()).await, Ok(0.0725));
    *latency.lock().unwrap() = 25 * SEC; // the bad deploy
    for _ in 0..5 {
        let e = tax.call(tax_api()).await.unwrap_err();
        assert!(e.breaker_error().unwrap().is_timeout());
    }
    assert_eq!(tax.state(), State::Open);
    assert_eq!(reached.load(SeqCst), 6);

    // Open: a checkout waits for nothing.
    let before = Instant::now();
    for _ in 0..1000 {
        assert!(tax.call(tax_api()).await.unwrap_err().is_open());
    }
    assert_eq!(Instant::now(), before, "rejections took no (virtual) time");
    assert_eq!(reached.load(SeqCst), 6);

    // After the cool-off, a hundred shoppers at once: exactly one probe reaches the API.
    advance(10 * SEC).await;
    let shoppers: Vec<_> = (0..100)
        .map(|_| {
            let (tax, api) = (tax.clone(), tax_api.clone());
            tokio::spawn(async move { tax.call(api()).await })
        })
        .collect();
    let mut open = 0;
    for s in shoppers {
        if let Err(e) = s.await.unwrap() {
            open += usize::from(e.is_open());
        }
    }
    assert_eq!(reached.load(SeqCst), 7, "exactly one probe");
    assert_eq!(open, 99);
    assert_eq!(tax.state(), State::Open, "the probe timed out: reopened");
    let s = tax.stats();
    assert_eq!((s.timeouts, s.rejected), (6, 1099));
}

/// Seed 002: a fraud vendor's EU region degrades for nine minutes; 50 % of a 20-call window
/// failing or slower than 2 s trips the breaker for 30 s; three probes test it; failed
/// probes reopen it. The vendor sees a trickle; checkout never waits on it while open.
#[tokio::test(start_paused = true)]
async fn fraud_vendor_incident() {
    let start = Instant::now();
    let incident = (60 * SEC)..(600 * SEC);
    let reached = Arc::new(AtomicUsize::new(0));
    let openings = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = openings.clone();
    let vendor = {
        let reached = reached.clone();
        let incident = incident.clone();
        move || {
            let reached = reached.clone();
            let degraded = incident.contains(&start.elapsed());
            async move {
                reached.fetch_add(1, SeqCst);
                if degraded {
                    tokio::time::sleep(10 * SEC).await; // cut by the 2 s timeout
                }
                Ok::<u8, String>(12) // a fraud score
            }
        }
    };
    let fraud = Arc::new(Breaker::new(
        "story::fraud_vendor",
        Config::default()
            .failure_rate(50)
            .window_calls(20)
            .timeout(2 * SEC)
            .cool_off(30 * SEC)
            .probes(3)
            .on_state_change(move |t| {
                if t.to == State::Open {
                    log.lock().unwrap().push(start.elapsed());
                }
            }),
    ));

    // Four checkouts a second for twelve minutes; each scores with the vendor or falls back.
    let mut checkouts = Vec::new();
    let mut reached_during_incident = 0;
    let mut states = Vec::new();
    for tick in 0..(12 * 60 * 4) {
        if tick % 4 == 0 {
            states.push(fraud.state());
        }
        let (fraud, vendor) = (fraud.clone(), vendor.clone());
        checkouts.push(tokio::spawn(async move {
            // Falls back to the rules-based score.
            fraud.call(vendor()).await.unwrap_or(50)
        }));
        let before = reached.load(SeqCst);
        advance(250 * MS).await;
        tokio::task::yield_now().await;
        if incident.contains(&start.elapsed()) {
            reached_during_incident += reached.load(SeqCst) - before;
        }
    }
    for c in checkouts {
        c.await.unwrap();
    }

    let incident_calls = 9 * 60 * 4;
    assert!(
        reached_during_incident < incident_calls / 10,
        "the vendor saw a trickle: {reached_during_incident} of {incident_calls} calls"
    );
    assert!(states[..60].iter().all(|s| *s == State::Closed));
    assert!(states.contains(&State::Open));
    assert!(states.contains(&State::HalfOpen));
    assert_eq!(
        fraud.state(),
        State::Closed,
        "closed again after the incident"
    );
    // Opened once by the window, then reopened by failed probes every 32 s (30 s open,
    // 2 s for the probes to time out) until the vendor recovered.
    let openings = openings.lock().unwrap().clone();
    assert!(openings.len() >= 15, "{openings:?}");
    for pair in openings.windows(2).skip(1) {
        assert_eq!(pair[1] - pair[0], 32 * SEC, "{openings:?}");
    }
    let s = fraud.stats();
    assert!(s.rejected > 1500, "{s:?}");
    assert!(s.timeouts >= 10, "{s:?}");
}
