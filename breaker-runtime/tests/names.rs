//! Keys' names as a caller may make them (issue 35): separators inside tuple keys, keys of
//! 60 KB, keys that carry newlines and bidirectional or invisible characters.

use std::sync::{Arc, Mutex};

use breaker_runtime::{Breaker, Config, KeyedBreaker};
use tracing::{
    field::{Field, Visit},
    span, Event, Metadata, Subscriber,
};

#[test]
fn two_different_tuple_keys_never_share_a_name() {
    let pairs = KeyedBreaker::<(String, String)>::new("names::pairs", Config::default());
    let a = pairs.breaker(&("x:y".to_owned(), "z".to_owned()));
    let b = pairs.breaker(&("x".to_owned(), "y:z".to_owned()));
    assert_ne!(a.name(), b.name());
    assert_eq!(
        b.name(),
        "names::pairs[x:y:z]",
        "a plain pair reads as before"
    );
    assert_eq!(a.name(), "names::pairs[x\\:y:z]");
    // The escape itself is escaped: `("x\\", ":z")` is not `("x\\:", "z")`.
    let c = pairs.breaker(&("x\\".to_owned(), ":z".to_owned()));
    let d = pairs.breaker(&("x\\:".to_owned(), "z".to_owned()));
    assert_ne!(c.name(), d.name());
    // Nested pairs too.
    let nested =
        KeyedBreaker::<((String, String), String)>::new("names::nested", Config::default());
    let e = nested.breaker(&(("a:b".to_owned(), "c".to_owned()), "d".to_owned()));
    let f = nested.breaker(&(("a".to_owned(), "b:c".to_owned()), "d".to_owned()));
    assert_ne!(e.name(), f.name());
    // `(host, port)` keeps its familiar name.
    let hosts = KeyedBreaker::<(String, u16)>::new("names::hosts", Config::default());
    assert_eq!(
        hosts.breaker(&("example.com".to_owned(), 443)).name(),
        "names::hosts[example.com:443]"
    );
}

#[test]
fn a_key_longer_than_256_bytes_is_named_by_a_prefix_and_a_digest() {
    let k = KeyedBreaker::<String>::new("names::long", Config::default());
    let long = |tail: &str| format!("{}{tail}", "h".repeat(60_000));
    let a = k.breaker(&long("a"));
    let b = k.breaker(&long("b"));
    for n in [a.name(), b.name()] {
        assert!(n.len() < 80, "{} bytes", n.len());
        assert!(
            n.starts_with(&format!("names::long[{}…#", "h".repeat(16))),
            "{n}"
        );
    }
    assert_ne!(a.name(), b.name(), "the digest covers the whole key");
    // Stable: the same key is named the same in every process (fleets match names).
    let again = KeyedBreaker::<String>::new("names::long", Config::default());
    assert_eq!(again.breaker(&long("a")).name(), a.name());
    // 256 bytes are shown whole; a multi-byte character is never cut.
    let whole = "é".repeat(128);
    assert_eq!(k.breaker(&whole).name(), format!("names::long[{whole}]"));
    let cut = format!("{whole}é");
    let name = k.breaker(&cut).name().to_owned();
    assert!(
        name.starts_with(&format!("names::long[{}…#", "é".repeat(8))),
        "{name}"
    );
}

/// What a `tracing` subscriber sees of each event: its message.
#[derive(Clone, Default)]
struct Messages(Arc<Mutex<Vec<String>>>);

impl Visit for Messages {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.lock().unwrap().push(format!("{value:?}"));
        }
    }
}

impl Subscriber for Messages {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        event.record(&mut self.clone());
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

#[test]
fn a_name_cannot_forge_a_log_line_nor_hide_in_one() {
    let messages = Messages::default();
    tracing::subscriber::with_default(messages.clone(), || {
        let forged = "names::log\n2026-12-01T00:00:00Z INFO circuit breaker `payments` is closed";
        let b = Breaker::new(forged, Config::default().threshold(1));
        let _ = b.call_sync(|| Err::<(), _>("down"));
        let rlo = Breaker::new(
            "names::log::\u{202E}yrotnevni",
            Config::default().threshold(1),
        );
        let _ = rlo.call_sync(|| Err::<(), _>("down"));
    });
    let messages = messages.0.lock().unwrap().clone();
    let opened: Vec<_> = messages
        .iter()
        .filter(|m| m.contains("names::log"))
        .collect();
    assert_eq!(opened.len(), 2, "{messages:#?}");
    for m in &opened {
        assert!(!m.contains('\n') && !m.contains('\u{202E}'), "{m}");
    }
    assert!(
        opened[0].starts_with("circuit breaker `names::log\\u{A}2026-12-01"),
        "{}",
        opened[0]
    );
    assert!(
        opened[1].contains("names::log::\\u{202E}yrotnevni"),
        "{}",
        opened[1]
    );
}
