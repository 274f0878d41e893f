//! Helpers shared by the integration tests: a dependency whose calls are counted, and a
//! subscriber that records the `tracing` events of the breaker.
#![allow(dead_code)]

use std::sync::{
    atomic::{AtomicUsize, Ordering::SeqCst},
    Arc, Mutex,
};

/// A dependency that counts the calls that reached it.
#[derive(Clone, Default)]
pub struct Dependency {
    reached: Arc<AtomicUsize>,
}

impl Dependency {
    pub fn reached(&self) -> usize {
        self.reached.load(SeqCst)
    }

    /// An async call that succeeds after `latency`.
    pub async fn ok(&self, latency: std::time::Duration) -> Result<&'static str, &'static str> {
        self.reached.fetch_add(1, SeqCst);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        Ok("ok")
    }

    /// An async call that fails at once.
    pub async fn fail(&self) -> Result<&'static str, &'static str> {
        self.reached.fetch_add(1, SeqCst);
        Err("502 bad gateway")
    }

    /// A sync call with the given result.
    pub fn sync(&self, ok: bool) -> Result<&'static str, &'static str> {
        self.reached.fetch_add(1, SeqCst);
        if ok {
            Ok("ok")
        } else {
            Err("502 bad gateway")
        }
    }
}

/// One recorded `tracing` event.
#[derive(Debug, Clone, Default)]
pub struct Event {
    pub level: String,
    pub target: String,
    pub fields: Vec<(String, String)>,
}

impl Event {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A minimal subscriber that records every event (the test only needs the fields).
#[derive(Clone, Default)]
pub struct Recorder {
    pub events: Arc<Mutex<Vec<Event>>>,
}

impl Recorder {
    /// Events whose `breaker` field is `name`.
    pub fn of(&self, name: &str) -> Vec<Event> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.field("breaker") == Some(name))
            .cloned()
            .collect()
    }
}

struct Visitor<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl tracing::Subscriber for Recorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Visitor(&mut fields));
        self.events.lock().unwrap().push(Event {
            level: event.metadata().level().to_string(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Polls a future once; `Some` if it finished.
pub async fn poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

/// Whether the registry no longer lists `name`, once any other test's snapshot that may hold
/// the breaker for an instant has let go (tests of one binary run in parallel, and a
/// snapshot keeps every breaker it reads alive while it reads). Waits on those threads by
/// yielding, a bounded number of times; never on time.
#[allow(dead_code)]
pub fn left_registry(name: &str) -> bool {
    for _ in 0..1_000_000 {
        if breaker_runtime::registry().get(name).is_none() {
            return true;
        }
        std::thread::yield_now();
    }
    false
}

/// Whether `done` holds once other threads holding a breaker for an instant (see
/// [`left_registry`]) have let go: yields between tries, a bounded number of times.
#[allow(dead_code)]
pub fn once_released(mut done: impl FnMut() -> bool) -> bool {
    (0..1_000_000).any(|_| {
        let ok = done();
        if !ok {
            std::thread::yield_now();
        }
        ok
    })
}
