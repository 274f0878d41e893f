//! Every breaker of the process, by name: for dashboards, health endpoints and manual
//! control.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, MutexGuard, PoisonError, Weak,
    },
    time::Duration,
};

use crate::{
    breaker::{Breaker, Handle, Shared},
    Config, State, Stats,
};

/// One breaker, as [`Registry::snapshot`] reports it.
///
/// `#[non_exhaustive]`: read the fields; more may follow.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    doc = r#"
# JSON (feature `serde`)

`Serialize` and `Deserialize` give this shape: `state` is one of `"closed"`, `"open"`,
`"half_open"`, `"forced_open"`, `"disabled"`; `retry_in` becomes `retry_in_ms`, whole
milliseconds (rounded), `null` when there is none; `failure_rate` is a percent; a `stats` field
missing from the input (written by an older version) reads as 0.

```json
{
  "name": "shop::get_tax",
  "state": "open",
  "stats": {"calls": 12, "successes": 5, "failures": 4, "timeouts": 1, "slow_calls": 0,
            "rejected": 3, "neutral": 0, "cancelled": 0},
  "failure_rate": 44.4,
  "retry_in_ms": 4200
}
```
"#
)]
pub struct Snapshot {
    /// The breaker's name (`{name}[{key}]` for a keyed breaker's).
    pub name: String,
    /// Its state.
    pub state: State,
    /// Its counts since creation or the last reset.
    pub stats: Stats,
    /// Percent failed in the current window, 0 when empty. A breaker that judges only
    /// consecutive failures keeps no window: there, the calls since it last closed (or was
    /// created or reset) stand for the window.
    pub failure_rate: f64,
    /// How long it stays open; when half-open with every probe slot taken, until the
    /// earliest lease ends; `None` otherwise and when forced open.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "retry_in_ms",
            with = "serde_with::As::<Option<serde_with::DurationMilliSeconds<u64>>>"
        )
    )]
    pub retry_in: Option<Duration>,
}

/// The process-wide list of live breakers; see [`registry()`].
pub struct Registry {
    /// Live breakers in order of creation. Entries are weak: the registry never keeps a
    /// breaker alive; a breaker leaves the list when its last clone and handle are dropped
    /// (`Shared`'s `Drop` removes its entry by id).
    breakers: Mutex<Vec<Entry>>,
    next_id: AtomicU64,
}

struct Entry {
    id: u64,
    shared: Weak<Shared>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("live", &self.lock().len())
            .finish()
    }
}

/// The process-wide registry: every live breaker, in order of creation.
///
/// ```
/// use breaker_runtime::{registry, Breaker, Config};
///
/// let b = Breaker::new("docs::registry", Config::default());
/// assert!(registry().snapshot().iter().any(|s| s.name == "docs::registry"));
/// drop(b); // the last clone: it leaves the registry
/// assert!(registry().get("docs::registry").is_none());
/// ```
pub fn registry() -> &'static Registry {
    static REGISTRY: Registry = Registry {
        breakers: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(1),
    };
    &REGISTRY
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.breakers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Strong references to the live breakers, in order of creation. Returned, so that
    /// they are dropped after the lock: dropping the last one runs `Shared::drop`, which
    /// takes the lock to unlist itself.
    fn all(&self) -> Vec<Arc<Shared>> {
        self.lock()
            .iter()
            .filter_map(|e| e.shared.upgrade())
            .collect()
    }

    /// A handle to the most recently created live breaker with this name (a `&str`, or a
    /// transition's [`Name`](crate::Name)).
    pub fn get(&self, name: impl AsRef<str>) -> Option<Handle> {
        let name = name.as_ref();
        self.all()
            .into_iter()
            .rev()
            .find(|s| *s.core.name == *name)
            .map(|shared| Handle { shared })
    }

    /// Every live breaker, in order of creation. Reading each state moves an open breaker
    /// whose cool-off ended to half-open, as `Handle::state` does.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        self.all()
            .into_iter()
            .map(|shared| Handle { shared }.snapshot())
            .collect()
    }

    /// Handles to every live breaker, in order of creation.
    pub fn handles(&self) -> Vec<Handle> {
        self.all()
            .into_iter()
            .map(|shared| Handle { shared })
            .collect()
    }

    /// How many breakers are live.
    pub fn len(&self) -> usize {
        self.lock()
            .iter()
            .filter(|e| e.shared.strong_count() > 0)
            .count()
    }

    /// Whether no breaker is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn list(&self, breaker: &Breaker) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        breaker.shared.listed.store(id, Ordering::Relaxed);
        let weak = Arc::downgrade(&breaker.shared);
        self.lock().push(Entry { id, shared: weak });
    }

    pub(crate) fn unlist(&self, id: u64) {
        self.lock().retain(|e| e.id != id);
    }

    /// The breaker named `name`, created with `config` if there is no live one yet. A
    /// breaker that exists with another policy, or another `on_state_change` hook, is kept,
    /// with one WARN naming it (logged after the lock is released). The attribute's
    /// functions with an explicit `name` share their breaker through this.
    ///
    /// # Panics
    ///
    /// If it has to create the breaker and `config` is invalid, as [`Breaker::new`] does.
    #[doc(hidden)]
    pub fn get_or_create(&self, name: &str, config: Config) -> Breaker {
        let (breaker, differs) = {
            let mut list = self.lock();
            let existing = list
                .iter()
                .rev()
                .filter_map(|e| e.shared.upgrade())
                .find(|s| *s.core.name == *name);
            match existing {
                Some(shared) => {
                    let differs = if !shared.config.same_policy(&config) {
                        Some("configuration")
                    } else if config.on_state_change.is_some() {
                        Some("`on_state_change` hook")
                    } else {
                        None
                    };
                    (Ok(Breaker { shared }), differs)
                }
                None => match Breaker::unlisted(name.into(), config) {
                    Ok(b) => {
                        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                        b.shared.listed.store(id, Ordering::Relaxed);
                        let weak = Arc::downgrade(&b.shared);
                        list.push(Entry { id, shared: weak });
                        (Ok(b), None)
                    }
                    Err(e) => (Err(e), None),
                },
            }
        };
        if let Some(what) = differs {
            tracing::warn!(
                target: "breaker",
                breaker = name,
                "circuit breaker `{name}` already exists; this function's {what} is not used, \
                 the existing breaker is kept (give the functions different `name`s to \
                 separate them)"
            );
        }
        match breaker {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        }
    }
}
