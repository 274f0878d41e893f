//! A live page of every breaker, served by your own axum server (feature `dashboard`).
//!
//! [`router()`] returns an [`axum::Router`] to mount wherever you like:
//!
//! | route | what |
//! | --- | --- |
//! | `GET /` | the page: one self-contained HTML file (its CSS and script inline, no CDN, no fonts, no build step; it works offline and asks nothing of any other host) |
//! | `GET /snapshot.json` | `{"breakers": [Snapshot, …], "keyed": [summary, …], "limit": 1000}`: every live breaker that is not a key, each keyed breaker summarised with its keys that are not closed listed (see below); `?limit=N` |
//! | `GET /events` | server-sent events: one `transition` event per transition, as it happens |
//! | `POST /breakers/{name}/force_open`, `…/disable`, `…/reset` | manual control, only in [`router_with_controls()`]; `?name=` (percent-encoded) names the breaker instead of the path, for names `.` and `..` |
//!
//! `config` is the configuration in force (the `serde` form of [`Config`](crate::Config):
//! the attribute's key names, humantime durations), which
//! [`reconfigure`](crate::Breaker::reconfigure) may have changed since the breaker was made.
//!
//! The page shows each breaker's state in colour (the configuration in force on its badge's
//! tooltip), its calls per second, failure rate and
//! calls, time left open, and a timeline of the last five minutes (state as a band, failure
//! rate as a line); the transitions arrive live over `/events` and are listed as they come.
//! Many breakers stay usable: open ones first (or sort by name, failure rate, calls per
//! second), a filter by name, a filter by state from the summary, and at most 200 rows drawn
//! at once. With controls, each row has *force open*, *disable* and *reset* buttons, each asking
//! for confirmation first. Names are shown as text, never parsed as HTML, with control,
//! bidirectional and invisible characters as `\u{…}` escapes (a name with a `\u{202E}` cannot
//! reverse its row, one ending in a `\u{200B}` cannot pass for another). A keyed breaker is
//! one line of counts per state, with rows for its keys that are not closed; the page polls
//! `snapshot.json?limit=200`, what it draws.
//!
//! # JSON shapes
//!
//! `/snapshot.json` (the `serde` shape of [`Snapshot`](crate::Snapshot), [`Stats`](crate::Stats)
//! and [`State`](crate::State), plus `fleet` (see below), `config`, and `age_ms`, how long
//! ago the breaker was made: its "last 5 min" bar is empty before that):
//!
//! ```json
//! {"breakers": [{
//!   "name": "shop::get_tax",
//!   "state": "open",
//!   "stats": {"calls": 12, "successes": 5, "failures": 4, "timeouts": 1, "slow_calls": 0,
//!             "rejected": 3, "neutral": 0, "cancelled": 0},
//!   "failure_rate": 44.4,
//!   "retry_in_ms": 4200,
//!   "fleet": false,
//!   "config": {"threshold": 5, "cool_off": "10s", "probes": 1, "max_keys": 10000, "idle": "10m"},
//!   "age_ms": 93000
//! }],
//! "keyed": [{"name": "reqwest", "keys": 100000, "not_closed": 3, "listed": 3,
//!            "states": {"open": 2, "forced_open": 1, "half_open": 0, "disabled": 0,
//!                       "closed": 99997}}],
//! "limit": 1000}
//! ```
//!
//! A keyed breaker may hold 100 000 keys: it is one summary in `keyed` (its keys per state),
//! and `breakers` holds, besides every breaker that is not a key, only its keys that are not
//! closed, the most severe first (open, forced open, half-open, disabled), at most `limit`
//! of them (`?limit=N`: default 1 000, at most 10 000), each with `"keyed": "<its keyed
//! breaker>"`; `not_closed` says how many there are, `listed` how many are listed. The answer
//! is built on tokio's blocking pool: the async workers go on serving the other routes.
//!
//! # Fleets
//!
//! With a fleet installed ([`breaker::fleet::install`](crate::fleet), feature `redis`), a
//! breaker that is a member of it has `"fleet": true`, and its buttons act fleet-wide: they
//! call [`Fleet::force_open`](crate::fleet::Fleet::force_open), `disable` or `reset` with its
//! name, so the breaker of that name in every instance follows, and instances that start
//! later too (until a reset). The page says so: a "fleet-wide" label under the row's
//! buttons, in their tooltips and in the confirmation. Any other breaker (no fleet, or not a
//! member of the installed one) is acted on in this instance only. A control's answer is the
//! breaker's snapshot with `fleet`, `scope` (`"fleet"` or `"instance"`: how far the action
//! went) and, when the fleet-wide action failed (Redis away or refusing), `fleet_error`:
//! the action is then done on this instance's breaker anyway (its members behave as local
//! breakers while Redis is away, and an operator in an incident needs the button), and the
//! page says "done on this instance only".
//!
//! `/events`, one per transition (`id` grows by one per transition, from the server's start
//! time in milliseconds, so it keeps growing across restarts; `at_ms` is the wall clock,
//! milliseconds since the Unix epoch; `cool_off_ms` is set when the breaker opened):
//!
//! ```text
//! event: transition
//! id: 1764509000017
//! data: {"id":1764509000017,"breaker":"shop::get_tax","from":"closed","to":"open","cause":"5 consecutive failures","generation":3,"cool_off_ms":10000,"at_ms":1764510000000,"dry_run":false}
//! ```
//!
//! The server keeps the last 500 transitions: a new connection receives them first (so the
//! page's timeline starts with the past), and a reconnecting `EventSource` (which sends
//! `Last-Event-ID`) receives only those it missed. Transitions are recorded from the first
//! call of `router()` or `router_with_controls()` on (make the router at start-up). The stream
//! sends nothing between transitions, and the dashboard runs no task and no timer of its own;
//! behind a proxy that closes idle connections, the page reconnects and misses nothing.
//!
//! # Mount it behind your own authentication
//!
//! Neither router checks who is asking: put it behind the authentication your service already
//! has, as an axum middleware layer on the nested router. The page's own requests (`fetch`,
//! `EventSource`) are same-origin and carry the browser's cookies and Basic credentials, so
//! cookie sessions, Basic auth and an authenticating proxy all work, also when the page was
//! opened at an address with the credentials in it (`http://ops:secret@host/ops/breakers/`):
//! it builds its URLs from the origin, which carries none, so the browser does not refuse
//! them.
//!
//! ```
//! use axum::{
//!     extract::Request,
//!     http::{header, HeaderValue, StatusCode},
//!     middleware::{self, Next},
//!     response::{IntoResponse, Response},
//!     routing::get,
//!     Router,
//! };
//!
//! /// Your own check: here HTTP Basic with one operator account ("ops", "secret").
//! async fn operators_only(req: Request, next: Next) -> Response {
//!     let expected = HeaderValue::from_static("Basic b3BzOnNlY3JldA==");
//!     if req.headers().get(header::AUTHORIZATION) == Some(&expected) {
//!         return next.run(req).await;
//!     }
//!     (
//!         StatusCode::UNAUTHORIZED,
//!         [(header::WWW_AUTHENTICATE, r#"Basic realm="breakers""#)],
//!     )
//!         .into_response()
//! }
//!
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "the service itself" }))
//!     .nest_service(
//!         "/ops/breakers",
//!         breaker::dashboard::router_with_controls().layer(middleware::from_fn(operators_only)),
//!     );
//! // axum::serve(listener, app).await
//! # let _ = app;
//! ```
//!
//! The page finds its routes relative to its own address, so any mount point works. Mount it
//! with `nest_service`, as above: the page then answers at both `/ops/breakers` and
//! `/ops/breakers/`. With `nest("/ops/breakers", …)` it answers at `/ops/breakers` only:
//! axum 0.8's `nest` routes the prefix without the trailing slash, and a router nested
//! inside cannot claim `/ops/breakers/` (your router's fallback answers it, 404 by
//! default).
//!
//! # What the dashboard checks, and what is yours to do
//!
//! - **`Host`** (DNS rebinding): every route answers `403` to a request whose `Host` is a name
//!   other than `localhost` or one you allowed with [`AllowHosts::allow_hosts`]; IP literals
//!   (`127.0.0.1:3100`, `[::1]:3100`, `10.0.0.5`) are answered. A page of any site can make
//!   its own name resolve to your dashboard's address and, being then "same-origin" with it,
//!   read and control it from a browser inside your network; the `Host` it sends is its own
//!   name, which gives it away. Reached by a name of yours (`ops.example.com`, a proxy that
//!   keeps the client's `Host`), allow that name: `router().allow_hosts(["ops.example.com"])`.
//! - **Cross-site control**: the control routes refuse a request a browser sent from another
//!   site (a `Sec-Fetch-Site` other than `same-origin`/`none`, or an `Origin` that is not the
//!   request's own origin, scheme included: behind no proxy the dashboard is plain HTTP and
//!   an `https` Origin is another origin; a proxy that ends TLS says `X-Forwarded-Proto:
//!   https`), so another site cannot make a logged-in operator's browser open a breaker;
//!   `curl` and other tools, which send neither header, are let through to your
//!   authentication.
//! - **The page** is sent with a Content-Security-Policy that runs its one script by its
//!   SHA-256 (no `'unsafe-inline'` script), lets it talk to its own origin only, and forbids
//!   framing; every answer (the page, JSON, events, errors, refusals) carries
//!   `X-Content-Type-Options: nosniff`.
//! - **Yours**: who may see and control the breakers. None of the above authenticates
//!   anyone: anything that reaches the dashboard by an allowed host (a port-forward, another
//!   process on the machine, anyone on an internal network) reads every breaker and, with
//!   controls, opens them. Mount it behind your authentication, as above, and on an address
//!   only operators reach.

mod guard;
mod listing;

pub use guard::AllowHosts;

use std::{
    collections::VecDeque,
    sync::{Arc, LazyLock, Mutex, MutexGuard, Once},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    extract::Path,
    http::{header, HeaderMap, StatusCode, Uri},
    response::{
        sse::{Event, Sse},
        IntoResponse, Response,
    },
    routing::{get, post},
    Json, Router,
};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::{registry, Handle, Transition};

/// The page, inline CSS and script included.
const PAGE: &str = include_str!("page.html");
/// The page's switch for its control buttons, as written in `page.html`.
const CONTROLS_OFF: &str = r#"<meta name="breaker-controls" content="off">"#;
/// Transitions kept for new and reconnecting clients.
const KEEP: usize = 500;

/// The page's Content-Security-Policy: its one script allowed by its hash (a script
/// injected into the page, were a name ever parsed as HTML, would not run), requests to its
/// own origin only, no framing.
fn csp() -> &'static str {
    static CSP: LazyLock<String> = LazyLock::new(|| {
        let script = PAGE
            .split_once("<script>")
            .and_then(|(_, rest)| rest.split_once("</script>"))
            .map_or("", |(script, _)| script);
        let hash = base64(&breaker_runtime::__internals::sha256(script.as_bytes()));
        format!(
            "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'"
        )
    });
    &CSP
}

/// Standard base64, padded (a CSP hash source).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The dashboard without controls: the page, `/snapshot.json` and `/events`. Read-only, but
/// it shows every breaker's name and figures: mount it behind your authentication (see the
/// [module docs](self)). It answers at `localhost` and IP addresses only, and at the names
/// you allow with [`allow_hosts`](AllowHosts::allow_hosts) (DNS rebinding: see
/// [what it checks](self#what-the-dashboard-checks-and-what-is-yours-to-do)).
pub fn router() -> Router {
    guard::layer(pages(false))
}

/// The dashboard with manual controls: [`router()`] plus `POST /breakers/{name}/force_open`,
/// `POST /breakers/{name}/disable` and `POST /breakers/{name}/reset` (the name
/// percent-encoded), each answering the breaker's snapshot as JSON (with `fleet`, `scope` and
/// maybe `fleet_error`), or 404 when no live breaker has that name. On a member of the
/// installed fleet they act fleet-wide (see [Fleets](self#fleets)). Anyone who reaches these routes can open your breakers: mount it
/// behind your authentication (see the [module docs](self)).
pub fn router_with_controls() -> Router {
    guard::layer(
        pages(true)
            .route("/breakers/{name}/force_open", post(force_open))
            .route("/breakers/{name}/disable", post(disable))
            .route("/breakers/{name}/reset", post(reset)),
    )
}

fn pages(controls: bool) -> Router {
    hub();
    let page: Arc<str> = if controls {
        PAGE.replacen(CONTROLS_OFF, &CONTROLS_OFF.replace("off", "on"), 1)
            .into()
    } else {
        PAGE.into()
    };
    Router::new()
        .route("/", get(move || page_response(page.clone())))
        .route("/snapshot.json", get(listing::snapshot))
        .route("/events", get(events))
}

async fn page_response(page: Arc<str>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::CONTENT_SECURITY_POLICY, csp()),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        page.to_string(),
    )
        .into_response()
}

/// A snapshot's JSON with `fields` added.
fn with(snapshot: crate::Snapshot, fields: &[(&str, Value)]) -> Value {
    let mut value = serde_json::to_value(snapshot).unwrap_or_default();
    if let Value::Object(map) = &mut value {
        for (k, v) in fields {
            map.insert((*k).to_owned(), v.clone());
        }
    }
    value
}

async fn events(headers: HeaderMap) -> Response {
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let hub = hub();
    let (backlog, rx) = {
        let log = hub.lock();
        let backlog: VecDeque<Arc<Recorded>> = log
            .recent
            .iter()
            .filter(|r| after.is_none_or(|after| r.id > after))
            .cloned()
            .collect();
        // Subscribed under the lock the observer records under: nothing is missed between
        // the backlog and the live events, and nothing comes twice.
        (backlog, hub.tx.subscribe())
    };
    let first = Event::default()
        .retry(Duration::from_secs(2))
        .comment("breaker");
    let stream = futures_util::stream::unfold(
        (Some(first), backlog, rx),
        |(mut first, mut backlog, mut rx)| async move {
            if let Some(hello) = first.take() {
                return Some((Ok(hello), (None, backlog, rx)));
            }
            let next = match backlog.pop_front() {
                Some(r) => r,
                None => loop {
                    match rx.recv().await {
                        Ok(r) => break r,
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                },
            };
            Some((
                Ok::<_, std::convert::Infallible>(next.event()),
                (None, backlog, rx),
            ))
        },
    );
    ([(header::CACHE_CONTROL, "no-store")], Sse::new(stream)).into_response()
}

async fn force_open(uri: Uri, headers: HeaderMap, Path(name): Path<String>) -> Response {
    control(&uri, &headers, &name, Action::ForceOpen).await
}

async fn disable(uri: Uri, headers: HeaderMap, Path(name): Path<String>) -> Response {
    control(&uri, &headers, &name, Action::Disable).await
}

async fn reset(uri: Uri, headers: HeaderMap, Path(name): Path<String>) -> Response {
    control(&uri, &headers, &name, Action::Reset).await
}

#[derive(Clone, Copy)]
enum Action {
    ForceOpen,
    Disable,
    Reset,
}

impl Action {
    /// On this instance's breaker only.
    fn local(self, handle: &Handle) {
        match self {
            Action::ForceOpen => handle.force_open(),
            Action::Disable => handle.disable(),
            Action::Reset => handle.reset(),
        }
    }
}

async fn control(uri: &Uri, headers: &HeaderMap, name: &str, action: Action) -> Response {
    if guard::cross_site(headers, uri) {
        return (
            StatusCode::FORBIDDEN,
            "cross-site requests may not control breakers\n",
        )
            .into_response();
    }
    let named = uri.query().and_then(name_in_query);
    let name = named.as_deref().unwrap_or(name);
    let Some(handle) = registry().get(name) else {
        return (
            StatusCode::NOT_FOUND,
            format!("no live breaker is named `{name}`\n"),
        )
            .into_response();
    };
    #[cfg(feature = "redis")]
    if let Some(fleet) = crate::fleet::installed().filter(|f| f.is_member(&handle)) {
        return fleet_wide(&fleet, &handle, action).await;
    }
    action.local(&handle);
    let fields = [
        ("fleet", Value::Bool(false)),
        ("scope", Value::from("instance")),
    ];
    Json(with(handle.snapshot(), &fields)).into_response()
}

/// `name=…` of a query, percent-decoded (`+` a space, as forms write it): the name of a
/// breaker called `.` or `..`, which cannot be a path segment (a URL drops dot segments, even
/// percent-encoded). The page sends those names so.
fn name_in_query(query: &str) -> Option<String> {
    let raw = query.split('&').find_map(|p| p.strip_prefix("name="))?;
    let mut bytes = Vec::with_capacity(raw.len());
    let mut rest = raw.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hex = rest.get(..2).and_then(|h| std::str::from_utf8(h).ok())?;
                bytes.push(u8::from_str_radix(hex, 16).ok()?);
                rest = &rest[2..];
            }
            b => bytes.push(b),
        }
    }
    String::from_utf8(bytes).ok()
}

/// `action` on every member of `handle`'s name in every instance. Redis away or refusing:
/// the operator still gets this instance's breaker (members behave as local breakers
/// meanwhile), and the answer says it went no further.
#[cfg(feature = "redis")]
async fn fleet_wide(fleet: &crate::fleet::Fleet, handle: &Handle, action: Action) -> Response {
    let name = handle.name();
    let done = match action {
        Action::ForceOpen => fleet.force_open(name).await,
        Action::Disable => fleet.disable(name).await,
        Action::Reset => fleet.reset(name).await,
    };
    let mut fields = vec![("fleet", Value::Bool(true))];
    match done {
        Ok(()) => fields.push(("scope", Value::from("fleet"))),
        Err(e) => {
            action.local(handle);
            fields.push(("scope", Value::from("instance")));
            fields.push(("fleet_error", Value::from(e.to_string())));
        }
    }
    Json(with(handle.snapshot(), &fields)).into_response()
}

/// One transition, ready to send.
struct Recorded {
    id: u64,
    json: String,
}

impl Recorded {
    fn event(&self) -> Event {
        Event::default()
            .event("transition")
            .id(self.id.to_string())
            .data(&self.json)
    }
}

/// The transitions seen since the first router was made: the recent ones, and the live feed.
struct Hub {
    log: Mutex<Log>,
    tx: broadcast::Sender<Arc<Recorded>>,
}

struct Log {
    /// The id of the last transition recorded.
    last_id: u64,
    recent: VecDeque<Arc<Recorded>>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, Log> {
        crate::sync::lock(&self.log)
    }

    fn record(&self, t: &Transition) {
        let at_ms = unix_ms();
        let mut log = self.lock();
        log.last_id += 1;
        let id = log.last_id;
        let json = serde_json::json!({
            "id": id,
            "breaker": t.name.to_string(),
            "from": t.from,
            "to": t.to,
            "cause": t.cause.to_string(),
            "generation": t.generation,
            "cool_off_ms": t.cool_off.map(|d| d.as_millis() as u64),
            "at_ms": at_ms,
            // A dry run's transition happened on paper: the page says "would".
            "dry_run": t.dry_run,
        })
        .to_string();
        let recorded = Arc::new(Recorded { id, json });
        if log.recent.len() == KEEP {
            log.recent.pop_front();
        }
        log.recent.push_back(recorded.clone());
        // Sent under the lock, so a new subscriber gets each transition once: in its backlog
        // or live. No receiver is not an error: nobody is watching right now.
        let _ = self.tx.send(recorded);
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The hub, watching transitions from its first use on.
fn hub() -> &'static Hub {
    static HUB: LazyLock<Hub> = LazyLock::new(|| Hub {
        log: Mutex::new(Log {
            // Ids start from the wall clock, so they still grow across a restart of the
            // server and a reconnecting page asks for the right ones.
            last_id: unix_ms(),
            recent: VecDeque::with_capacity(KEEP),
        }),
        tx: broadcast::channel(KEEP).0,
    });
    static WATCH: Once = Once::new();
    WATCH.call_once(|| observe_forever(|t| HUB.record(t)));
    &HUB
}

/// The one place that names the runtime's transition feed.
fn observe_forever(f: fn(&Transition)) {
    crate::observe(f).forever();
}
