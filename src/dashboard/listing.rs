//! `/snapshot.json`: every breaker, with keyed breakers summarised, bounded whatever the
//! number of keys.
//!
//! A keyed breaker may hold 100 000 keys (the reqwest middleware's hosts, a tenant map):
//! listed one by one they made a 30 MB answer that took a second of a server's async worker
//! to write. So a keyed breaker is one summary (its keys per state, as the metrics count
//! them), and only its keys that are not closed are listed one by one, the most severe first
//! (open, forced open, half-open, disabled), at most `limit` of them (`?limit=N`, default
//! [`LIMIT`], at most [`MAX_LIMIT`]), with how many there are. A closed key looks like every
//! other closed key: the summary says how many. The answer is built on tokio's blocking pool,
//! never on the async workers that serve the other routes.

use std::collections::HashMap;

use axum::{
    http::{header, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{json, Map, Value};

use crate::{registry, Handle, State};

/// Keys listed per keyed breaker without `?limit`.
pub(super) const LIMIT: usize = 1_000;
/// The most `?limit` may ask for: the answer stays a few megabytes at most.
pub(super) const MAX_LIMIT: usize = 10_000;

/// The states in the order their keys are listed, the most severe first (the page's order).
const SEVERITY: [State; 5] = [
    State::Open,
    State::ForcedOpen,
    State::HalfOpen,
    State::Disabled,
    State::Closed,
];

pub(super) async fn snapshot(uri: Uri) -> Response {
    let limit = match limit(uri.query()) {
        Ok(limit) => limit,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    // Reading 100 000 breakers and writing the answer takes milliseconds to a second: on the
    // blocking pool, so the other routes (and everything else the server runs) go on.
    match tokio::task::spawn_blocking(move || serde_json::to_vec(&listing(limit))).await {
        Ok(Ok(body)) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        _ => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `limit=N` of the query, else [`LIMIT`]; capped at [`MAX_LIMIT`].
fn limit(query: Option<&str>) -> Result<usize, &'static str> {
    let asked = query
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("limit="));
    match asked {
        None => Ok(LIMIT),
        Some(n) => n
            .parse::<usize>()
            .map(|n| n.min(MAX_LIMIT))
            .map_err(|_| "limit must be a whole number of keys\n"),
    }
}

/// One keyed breaker as the walk finds it.
#[derive(Default)]
struct Family {
    /// Keys per state, in [`SEVERITY`]'s order.
    counts: [u64; 5],
    /// Its keys that are not closed.
    not_closed: Vec<(usize, Handle)>,
}

/// The answer: `breakers` (every breaker that is not a key, and the keys listed) and `keyed`
/// (one summary per keyed breaker).
pub(super) fn listing(limit: usize) -> Value {
    let fleet = Fleet::installed();
    let mut breakers = Vec::new();
    let mut families: Vec<(String, Family)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for h in registry().handles() {
        let Some(name) = h.family() else {
            breakers.push(fleet.listed(&h));
            continue;
        };
        let i = match at.get(name) {
            Some(i) => *i,
            None => {
                at.insert(name.to_owned(), families.len());
                families.push((name.to_owned(), Family::default()));
                families.len() - 1
            }
        };
        let family = &mut families[i].1;
        let state = h.state();
        let rank = SEVERITY.iter().position(|s| *s == state).unwrap_or(0);
        family.counts[rank] += 1;
        if state != State::Closed {
            family.not_closed.push((rank, h));
        }
    }
    let mut keyed = Vec::with_capacity(families.len());
    for (name, mut family) in families {
        let not_closed = family.not_closed.len();
        family.not_closed.sort_by_key(|(rank, _)| *rank); // stable: then by creation
        family.not_closed.truncate(limit);
        let listed = family.not_closed.len();
        for (_, h) in &family.not_closed {
            let mut snap = fleet.listed(h);
            if let Value::Object(map) = &mut snap {
                map.insert("keyed".to_owned(), Value::from(name.as_str()));
            }
            breakers.push(snap);
        }
        let states: Map<String, Value> = SEVERITY
            .iter()
            .zip(family.counts)
            .map(|(s, n)| (s.as_str().to_owned(), Value::from(n)))
            .collect();
        keyed.push(json!({
            "name": name,
            "keys": family.counts.iter().sum::<u64>(),
            "states": states,
            "not_closed": not_closed,
            "listed": listed,
        }));
    }
    json!({ "breakers": breakers, "keyed": keyed, "limit": limit })
}

/// The installed fleet, if any: whose members' buttons act fleet-wide.
struct Fleet {
    #[cfg(feature = "redis")]
    fleet: Option<crate::fleet::Fleet>,
}

impl Fleet {
    fn installed() -> Fleet {
        Fleet {
            #[cfg(feature = "redis")]
            fleet: crate::fleet::installed(),
        }
    }

    /// A breaker's snapshot with `"fleet"`: whether it is a member of the installed fleet.
    fn listed(&self, h: &Handle) -> Value {
        #[cfg(feature = "redis")]
        let member = self.fleet.as_ref().is_some_and(|f| f.is_member(h));
        #[cfg(not(feature = "redis"))]
        let member = false;
        // The configuration in force, as a file would write it (its keys are the attribute's;
        // `reconfigure` may have changed it since the breaker was made).
        let config = serde_json::to_value(h.config()).unwrap_or(Value::Null);
        // How long it has existed: the page draws nothing of its history before that.
        let age_ms = u64::try_from(h.age().as_millis()).unwrap_or(u64::MAX);
        super::with(
            h.snapshot(),
            &[
                ("fleet", Value::Bool(member)),
                ("config", config),
                ("age_ms", Value::from(age_ms)),
            ],
        )
    }
}
