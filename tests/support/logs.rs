//! The messages of `tracing` events at one level and target, for tests that assert what a
//! breaker logged: `Logs::new(Level::WARN, "breaker")` as the default subscriber, then
//! `logs.messages()`.

use std::sync::{Arc, Mutex};

use tracing::{field, span, Event, Level, Metadata, Subscriber};

/// Records the `message` of every event at `level` with `target`; clones share the record.
#[derive(Clone)]
pub struct Logs {
    level: Level,
    target: &'static str,
    said: Arc<Mutex<Vec<String>>>,
}

impl Logs {
    pub fn new(level: Level, target: &'static str) -> Logs {
        Logs {
            level,
            target,
            said: Arc::default(),
        }
    }

    /// What was logged so far, in order.
    pub fn messages(&self) -> Vec<String> {
        self.said.lock().unwrap().clone()
    }
}

struct Message<'a>(&'a mut String);

impl field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Logs {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        if *meta.level() == self.level && meta.target() == self.target {
            let mut message = String::new();
            event.record(&mut Message(&mut message));
            self.said.lock().unwrap().push(message);
        }
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}
