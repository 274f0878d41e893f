//! The worst stall of the runtime a test runs on: a task that sleeps 1 ms at a time and
//! keeps the longest gap between its wake-ups (what a call on that runtime would wait).

use std::{
    sync::{
        atomic::{AtomicBool, Ordering::SeqCst},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

pub struct StallMeter {
    worst: Arc<Mutex<Duration>>,
    stop: Arc<AtomicBool>,
    ticker: tokio::task::JoinHandle<()>,
}

impl StallMeter {
    /// Starts measuring on the current runtime.
    pub fn start() -> Self {
        let worst = Arc::new(Mutex::new(Duration::ZERO));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (worst, stop) = (worst.clone(), stop.clone());
            tokio::spawn(async move {
                let mut last = Instant::now();
                while !stop.load(SeqCst) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let gap = last.elapsed();
                    let mut w = worst.lock().unwrap();
                    *w = (*w).max(gap);
                    last = Instant::now();
                }
            })
        };
        StallMeter {
            worst,
            stop,
            ticker,
        }
    }

    /// Stops measuring: the longest gap seen.
    pub async fn stop(self) -> Duration {
        self.stop.store(true, SeqCst);
        self.ticker.await.unwrap();

        *self.worst.lock().unwrap()
    }
}
