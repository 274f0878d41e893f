//! What the dashboard checks of each request before its routes see it, and what every answer
//! says: the `Host` (DNS rebinding), the origin of a control request, `nosniff`.
//!
//! **DNS rebinding**: a page at `http://evil.example:3100/` whose name the attacker then
//! resolves to the dashboard's address is, to the browser, the same origin as the dashboard
//! it now reaches: its `fetch`es carry `Sec-Fetch-Site: same-origin` and read the answers.
//! What gives it away is the `Host` it sends, its own name. So a request whose `Host` is a
//! name (an IP literal cannot be rebound) other than `localhost` or one the user allowed
//! ([`AllowHosts::allow_hosts`]) is refused with `403`, on every route, the page and the
//! read-only ones included (they show every breaker's name and figures).

use std::{
    net::{Ipv4Addr, Ipv6Addr},
    sync::Arc,
};

use axum::{
    extract::Request,
    http::{header, HeaderMap, HeaderValue, StatusCode, Uri},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    Router,
};

/// The names the dashboard answers at besides `localhost` and IP literals:
/// `breaker::dashboard::router().allow_hosts(["ops.example.com"])`, the same on
/// [`router_with_controls()`](super::router_with_controls).
///
/// Why: a browser page of any site can make its own name resolve to your dashboard's address
/// (DNS rebinding) and then read and control it as if it were the dashboard's own page; the
/// `Host` it sends is its name, so the dashboard answers only the names it knows. Reached by
/// a name (a DNS name of the machine, a proxy that keeps the client's `Host`), the dashboard
/// answers `403` until that name is allowed here. Each entry is matched exactly, ignoring
/// case: a name alone (`"ops.example.com"`) is allowed on any port, a name with a port
/// (`"ops.example.com:8443"`) on that port only. Calls add up.
///
/// ```
/// use breaker::dashboard::AllowHosts as _;
///
/// let app: axum::Router = axum::Router::new().nest_service(
///     "/ops/breakers",
///     breaker::dashboard::router_with_controls().allow_hosts(["ops.example.com", "ops:8080"]),
/// );
/// # let _ = app;
/// ```
///
/// Implemented for the dashboard's [`Router`]: on a router that holds no dashboard it does
/// nothing but say which names a dashboard nested in it answers.
pub trait AllowHosts {
    /// Also answers requests for these names (see the [trait docs](AllowHosts)).
    #[must_use]
    fn allow_hosts<I>(self, hosts: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>;
}

impl AllowHosts for Router {
    fn allow_hosts<I>(self, hosts: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let hosts: Arc<[Allowed]> = hosts
            .into_iter()
            .map(|h| Allowed::parse(h.as_ref()))
            .collect();
        // Said to the dashboard's own check (a layer inside this one) through the request:
        // the router is built already, and this works however it is nested.
        self.layer(middleware::from_fn(move |mut req: Request, next: Next| {
            let mine = hosts.clone();
            let all = match req.extensions_mut().remove::<AllowedHosts>() {
                Some(AllowedHosts(before)) => before.iter().chain(mine.iter()).cloned().collect(),
                None => mine,
            };
            req.extensions_mut().insert(AllowedHosts(all));
            next.run(req)
        }))
    }
}

/// The names allowed, carried by the request to the check.
#[derive(Clone)]
struct AllowedHosts(Arc<[Allowed]>);

/// One allowed name, lower-case, with its port if one was given.
#[derive(Clone)]
struct Allowed {
    name: String,
    port: Option<String>,
}

impl Allowed {
    fn parse(entry: &str) -> Allowed {
        let (name, port) = split(entry.trim());
        Allowed {
            name: name.to_ascii_lowercase(),
            port: port.map(str::to_owned),
        }
    }

    fn admits(&self, name: &str, port: Option<&str>) -> bool {
        self.name.eq_ignore_ascii_case(name)
            && (self.port.is_none() || self.port.as_deref() == port)
    }
}

/// `host[:port]` as its name and port; an IPv6 literal keeps its brackets.
fn split(host: &str) -> (&str, Option<&str>) {
    let name_end = if host.starts_with('[') {
        host.find(']').map_or(host.len(), |i| i + 1)
    } else {
        host.rfind(':').unwrap_or(host.len())
    };
    match host[name_end..].strip_prefix(':') {
        Some(port) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (&host[..name_end], Some(port))
        }
        // No port, or `name:junk` (no browser sends it): matched whole, nothing admits it.
        _ => (host, None),
    }
}

/// The layer every dashboard route sits behind.
pub(super) fn layer(router: Router) -> Router {
    router.layer(middleware::from_fn(check))
}

async fn check(req: Request, next: Next) -> Response {
    let mut answer = if host_allowed(&req) {
        next.run(req).await
    } else {
        (
            StatusCode::FORBIDDEN,
            "this dashboard answers at localhost, at an IP address, and at the names allowed \
             with `allow_hosts` only (DNS rebinding)\n",
        )
            .into_response()
    };
    // JSON, events, errors and the page alike: never read as another type.
    answer.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    answer
}

/// Whether the request's host (its `Host`, or the authority of an HTTP/2 request) is an IP
/// literal, `localhost` or allowed. A request with neither (no browser sends one) passes.
fn host_allowed(req: &Request) -> bool {
    let host = match req.headers().get(header::HOST) {
        Some(value) => match value.to_str() {
            Ok(host) => host,
            Err(_) => return false,
        },
        None => match req.uri().authority() {
            Some(authority) => authority.as_str(),
            None => return true,
        },
    };
    let (name, port) = split(host);
    if is_ip_literal(name) || name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    req.extensions()
        .get::<AllowedHosts>()
        .is_some_and(|AllowedHosts(allowed)| allowed.iter().any(|a| a.admits(name, port)))
}

fn is_ip_literal(name: &str) -> bool {
    match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().is_ok(),
        None => name.parse::<Ipv4Addr>().is_ok(),
    }
}

/// Whether a browser sent this request from another site: `Sec-Fetch-Site` when the browser
/// sends it, else an `Origin` that is not this request's own origin, scheme included (behind
/// no proxy the dashboard is plain HTTP, and an `https` page is another origin). The scheme
/// is the request's when it carries one (HTTP/2), else what a proxy that ends TLS says in
/// `X-Forwarded-Proto`, else `http`. Tools that send neither header pass.
pub(super) fn cross_site(headers: &HeaderMap, uri: &Uri) -> bool {
    let value = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(site) = value("sec-fetch-site") {
        return !matches!(site, "same-origin" | "none");
    }
    let Some(origin) = value("origin") else {
        return false;
    };
    let Some(host) = value("host").or_else(|| uri.authority().map(|a| a.as_str())) else {
        return true;
    };
    let scheme = uri
        .scheme_str()
        .or_else(|| value("x-forwarded-proto").and_then(|p| p.split(',').next()))
        .map_or("http", str::trim);
    let Some((origin_scheme, origin_host)) = origin.split_once("://") else {
        return true; // `null`, or not an origin at all
    };
    !(origin_scheme.eq_ignore_ascii_case(scheme) && origin_host.eq_ignore_ascii_case(host))
}
