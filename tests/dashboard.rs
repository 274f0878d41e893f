//! The dashboard: its routes over plain HTTP, and its page in a real headless chromium.
//!
//! The browser is driven through the DevTools protocol over its WebSocket, with a dozen
//! commands written out below (`Target.*`, `Page.navigate`, `Runtime.evaluate`,
//! `Page.captureScreenshot`, `Network.enable`): that needs `tokio-tungstenite` and nothing
//! else, where a typed client would compile the whole generated protocol. Waiting for the page
//! is a bounded number of checks of the DOM, spaced in the browser; nothing here sleeps or
//! measures time. The breakers run on tokio's paused clock and the test moves it by hand.
#![cfg(feature = "dashboard")]

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use axum::{
    extract::Request,
    http::{header, HeaderValue, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use base64::Engine as _;
use breaker::{Breaker, Config, State};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    sync::{mpsc, oneshot},
};
use tokio_tungstenite::tungstenite::Message;

#[cfg(feature = "redis")]
#[path = "support/redis.rs"]
#[allow(dead_code)] // the cluster's helpers are tests/fleet_cluster.rs's
mod redis_server;

/// The registry is the process's, and a test that reads every breaker (`publish`,
/// `/snapshot.json`) reads the others' with its own paused clock, which may have moved past
/// their cool-offs. So these tests run one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---- a server on a free loopback port ------------------------------------------------------

/// Serves `app` on 127.0.0.1:0; every request's path is written down in `seen`.
async fn serve(app: Router) -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = app.layer(middleware::from_fn(move |req: Request, next: Next| {
        log.lock().unwrap().push(req.uri().path().to_owned());
        next.run(req)
    }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

/// One HTTP/1.1 request on a fresh connection: status, headers (lower-case names), body.
async fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, HashMap<String, String>, String) {
    let addr = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The `Host` is the address connected to, unless the test forges one.
    let host = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map_or(addr, |(_, v)| *v);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
    {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect::<HashMap<_, _>>();
    let body = if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, headers, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

async fn fail(b: &Breaker) {
    let _ = b.call(async { Err::<(), _>("503") }).await;
}

async fn succeed(b: &Breaker) {
    b.call(async { Ok::<_, &str>(()) }).await.unwrap();
}

fn slow_to_open(threshold: u32) -> Config {
    Config::default()
        .threshold(threshold)
        .cool_off(Duration::from_secs(3600))
}

// ---- plain HTTP ----------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_read_only_router_has_no_control_routes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::read_only", slow_to_open(1));
    succeed(&b).await;
    let (base, _) = serve(breaker::dashboard::router()).await;
    for action in ["force_open", "disable", "reset"] {
        let (status, _, _) = http(
            &base,
            "POST",
            &format!("/breakers/dash_http::read_only/{action}"),
            &[],
        )
        .await;
        assert!(
            status == 404 || status == 405,
            "POST {action} answered {status}"
        );
    }
    assert_eq!(b.state(), State::Closed);
    let (status, _, page) = http(&base, "GET", "/", &[]).await;
    assert_eq!(status, 200);
    assert!(page.contains(r#"<meta name="breaker-controls" content="off">"#));
}

#[tokio::test(start_paused = true)]
async fn the_control_routes_act_post_only_and_refuse_cross_site_requests() {
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::controls", slow_to_open(1));
    succeed(&b).await;
    let (base, _) = serve(breaker::dashboard::router_with_controls()).await;
    let path = "/breakers/dash_http::controls";

    let (status, _, _) = http(&base, "GET", &format!("{path}/force_open"), &[]).await;
    assert_eq!(status, 405, "GET may not control");
    assert_eq!(b.state(), State::Closed);

    let (status, _, _) = http(
        &base,
        "POST",
        &format!("{path}/force_open"),
        &[("Origin", "https://evil.example")],
    )
    .await;
    assert_eq!(status, 403);
    let (status, _, _) = http(
        &base,
        "POST",
        &format!("{path}/force_open"),
        &[("Sec-Fetch-Site", "cross-site")],
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(b.state(), State::Closed);

    let origin = base.clone();
    let (status, _, body) = http(
        &base,
        "POST",
        &format!("{path}/force_open"),
        &[("Origin", &origin), ("Sec-Fetch-Site", "same-origin")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let snap: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(snap["state"], "forced_open");
    assert_eq!(b.state(), State::ForcedOpen);

    let (status, _, _) = http(&base, "POST", &format!("{path}/disable"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(b.state(), State::Disabled);
    let (status, _, _) = http(&base, "POST", &format!("{path}/reset"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().calls, 0, "reset clears the counts");

    let (status, _, body) = http(&base, "POST", "/breakers/dash_http::nobody/reset", &[]).await;
    assert_eq!(status, 404);
    assert!(body.contains("dash_http::nobody"), "{body}");
    let (status, _, _) = http(&base, "POST", &format!("{path}/explode"), &[]).await;
    assert_eq!(status, 404);

    // A name with characters a path cannot hold raw: percent-encoded, as the page sends it.
    let odd = Breaker::new("dash_http::odd[a/b c?]", slow_to_open(1));
    let (status, _, _) = http(
        &base,
        "POST",
        "/breakers/dash_http%3A%3Aodd%5Ba%2Fb%20c%3F%5D/force_open",
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(odd.state(), State::ForcedOpen);

    let (_, _, page) = http(&base, "GET", "/", &[]).await;
    assert!(page.contains(r#"<meta name="breaker-controls" content="on">"#));
}

/// Issue 35, DNS rebinding: a page at `http://evil.example:3100/` whose name the attacker
/// resolves to the dashboard's address is same-origin with it, so the browser sends its
/// requests with `Host: evil.example:3100` (and `Sec-Fetch-Site: same-origin`). Every route
/// refuses a `Host` that is a name other than `localhost` or an allowed one.
#[tokio::test(start_paused = true)]
async fn a_request_for_a_host_name_not_allowed_is_refused_whatever_the_route() {
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::rebinding", slow_to_open(1));
    succeed(&b).await;
    let (base, _) = serve(breaker::dashboard::router_with_controls()).await;
    let port = base.rsplit(':').next().unwrap().to_owned();
    let evil = format!("evil.example:{port}");
    let evil_origin = format!("http://{evil}");
    let forged = [
        ("Host", evil.as_str()),
        ("Origin", evil_origin.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let control = "/breakers/dash_http::rebinding/force_open";
    let (status, headers, body) = http(&base, "POST", control, &forged).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(b.state(), State::Closed, "the breaker was not forced open");
    for path in ["/", "/snapshot.json", "/events"] {
        let (status, _, body) = http(&base, "GET", path, &forged[..1]).await;
        assert_eq!(status, 403, "GET {path}: {body}");
        assert!(!body.contains("dash_http::rebinding"), "{body}");
    }
    // Case and a trailing dot do not sneak a name past.
    for host in [
        format!("EVIL.example:{port}"),
        format!("localhost.evil:{port}"),
        "evil.example".to_owned(),
    ] {
        let (status, _, _) = http(&base, "GET", "/snapshot.json", &[("Host", &host)]).await;
        assert_eq!(status, 403, "{host}");
    }

    // Loopback and IP literals (what nobody can rebind) and `localhost` are answered.
    for host in [
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        "localhost".to_owned(),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("10.1.2.3:{port}"),
    ] {
        let (status, _, body) = http(&base, "GET", "/snapshot.json", &[("Host", &host)]).await;
        assert_eq!(status, 200, "{host}: {body}");
        assert!(body.contains("dash_http::rebinding"));
    }
    let local = format!("localhost:{port}");
    let local_origin = format!("http://{local}");
    let (status, _, body) = http(
        &base,
        "POST",
        control,
        &[("Host", &local), ("Origin", &local_origin)],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(b.state(), State::ForcedOpen);
    b.handle().reset();
}

/// Names the user allows are answered, exactly: a name alone on any port, a name with a port
/// on that port only; the same on `router()`.
#[tokio::test(start_paused = true)]
async fn allow_hosts_names_the_hosts_answered_besides_loopback() {
    use breaker::dashboard::AllowHosts as _;
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::allowed", slow_to_open(1));
    succeed(&b).await;
    let app = breaker::dashboard::router_with_controls()
        .allow_hosts(["ops.internal", "Breakers.Example.com:8443"]);
    let (base, _) = serve(app).await;
    let control = "/breakers/dash_http::allowed/force_open";
    for (host, expected) in [
        ("ops.internal:3100", 200),
        ("OPS.internal", 200),
        ("breakers.example.com:8443", 200),
        ("breakers.example.com:3100", 403),
        ("breakers.example.com", 403),
        ("ops.internal.evil.example", 403),
        ("evil.example", 403),
    ] {
        let (status, _, body) = http(&base, "GET", "/snapshot.json", &[("Host", host)]).await;
        assert_eq!(status, expected, "{host}: {body}");
    }
    let (status, _, body) = http(
        &base,
        "POST",
        control,
        &[
            ("Host", "ops.internal:3100"),
            ("Origin", "http://ops.internal:3100"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(b.state(), State::ForcedOpen);

    let (base, _) = serve(breaker::dashboard::router().allow_hosts(["ops.internal"])).await;
    let (status, _, _) = http(&base, "GET", "/", &[("Host", "ops.internal")]).await;
    assert_eq!(status, 200);
    let (status, _, _) = http(&base, "GET", "/", &[("Host", "evil.example")]).await;
    assert_eq!(status, 403);

    // Said on the router it is nested in, for every dashboard inside; calls add up.
    let app = Router::new()
        .nest_service(
            "/ops",
            breaker::dashboard::router().allow_hosts(["inner.internal"]),
        )
        .allow_hosts(["outer.internal"]);
    let (base, _) = serve(app).await;
    for (host, expected) in [
        ("inner.internal", 200),
        ("outer.internal", 200),
        ("evil.example", 403),
    ] {
        let (status, _, _) = http(&base, "GET", "/ops/snapshot.json", &[("Host", host)]).await;
        assert_eq!(status, expected, "{host}");
    }
}

/// The `Origin` check compares the scheme too: behind no proxy the dashboard is served over
/// plain HTTP, and an `https` page is another origin.
#[tokio::test(start_paused = true)]
async fn an_origin_of_another_scheme_may_not_control_breakers() {
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::scheme", slow_to_open(1));
    succeed(&b).await;
    let (base, _) = serve(breaker::dashboard::router_with_controls()).await;
    let control = "/breakers/dash_http::scheme/force_open";
    let https = base.replace("http://", "https://");
    let (status, _, _) = http(&base, "POST", control, &[("Origin", &https)]).await;
    assert_eq!(status, 403);
    assert_eq!(b.state(), State::Closed);
    let (status, _, body) = http(&base, "POST", control, &[("Origin", &base)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(b.state(), State::ForcedOpen);
    // A proxy that ends TLS says so; the Origin is then https.
    b.handle().reset();
    let (status, _, body) = http(
        &base,
        "POST",
        control,
        &[("Origin", &https), ("X-Forwarded-Proto", "https")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// Issue 35, finding 7: every answer says `nosniff` (JSON, events, errors, refusals), and the
/// page's script is allowed by its hash, not by `'unsafe-inline'`.
#[tokio::test(start_paused = true)]
async fn every_answer_says_nosniff_and_the_script_is_allowed_by_its_hash() {
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::nosniff", slow_to_open(1));
    let (base, _) = serve(breaker::dashboard::router_with_controls()).await;
    for (method, path, headers, expected) in [
        ("GET", "/", &[][..], 200),
        ("GET", "/snapshot.json", &[], 200),
        ("POST", "/breakers/dash_http::nosniff/reset", &[], 200),
        ("POST", "/breakers/dash_http::nobody/reset", &[], 404),
        ("GET", "/breakers/dash_http::nosniff/reset", &[], 405),
        ("GET", "/no/such/route", &[], 404),
        (
            "POST",
            "/breakers/dash_http::nosniff/reset",
            &[("Sec-Fetch-Site", "cross-site")],
            403,
        ),
        ("GET", "/snapshot.json", &[("Host", "evil.example")], 403),
    ] {
        let (status, h, _) = http(&base, method, path, headers).await;
        assert_eq!(status, expected, "{method} {path}");
        assert_eq!(
            h.get("x-content-type-options").map(String::as_str),
            Some("nosniff"),
            "{method} {path} {headers:?}"
        );
    }
    // The event stream's headers, read off the first bytes.
    let addr = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = BufReader::new(stream);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        head.read_line(&mut line).await.unwrap();
        if line.trim().is_empty() {
            break;
        }
        lines.push(line.trim().to_ascii_lowercase());
    }
    assert!(
        lines.iter().any(|l| l == "x-content-type-options: nosniff"),
        "{lines:?}"
    );

    let (_, h, page) = http(&base, "GET", "/", &[]).await;
    let csp = &h["content-security-policy"];
    let script_src = csp
        .split(';')
        .map(str::trim)
        .find(|d| d.starts_with("script-src"))
        .unwrap();
    assert!(!script_src.contains("unsafe-inline"), "{csp}");
    let script = page
        .split_once("<script>")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .unwrap()
        .0;
    assert_eq!(
        script_src,
        format!("script-src 'sha256-{}'", sha256_base64(script.as_bytes())),
        "the hash of the page's one script"
    );
    drop(b);
}

/// SHA-256 (FIPS 180-4) of `data`, base64: the test's own, to check the page's header.
fn sha256_base64(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(block[4 * i..4 * i + 4].try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    let bytes: Vec<u8> = h.iter().flat_map(|x| x.to_be_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn the_tests_sha256_is_sha256() {
    assert_eq!(
        sha256_base64(b"abc"),
        "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=",
        "FIPS 180-4's example"
    );
    assert_eq!(
        sha256_base64(b""),
        "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    );
}

/// The module docs' example, run: without the credentials nothing of the dashboard answers.
#[tokio::test(start_paused = true)]
async fn mounted_behind_a_middleware_nothing_answers_without_credentials() {
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::behind_auth", slow_to_open(1));
    let app = Router::new()
        .route("/", get(|| async { "the service itself" }))
        .nest_service(
            "/ops/breakers",
            breaker::dashboard::router_with_controls().layer(middleware::from_fn(operators_only)),
        );
    let (base, _) = serve(app).await;
    let auth = [("Authorization", "Basic b3BzOnNlY3JldA==")];
    for (method, path) in [
        ("GET", "/ops/breakers"),
        ("GET", "/ops/breakers/"),
        ("GET", "/ops/breakers/snapshot.json"),
        ("GET", "/ops/breakers/events"),
        (
            "POST",
            "/ops/breakers/breakers/dash_http::behind_auth/force_open",
        ),
    ] {
        let (status, headers, _) = http(&base, method, path, &[]).await;
        assert_eq!(status, 401, "{method} {path}");
        assert!(headers.contains_key("www-authenticate"));
    }
    assert_eq!(b.state(), State::Closed);
    for path in ["/ops/breakers", "/ops/breakers/"] {
        let (status, _, page) = http(&base, "GET", path, &auth).await;
        assert_eq!(status, 200, "{path}");
        assert!(page.contains("<title>Circuit breakers</title>"));
    }
    let (status, _, _) = http(
        &base,
        "POST",
        "/ops/breakers/breakers/dash_http::behind_auth/force_open",
        &auth,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(b.state(), State::ForcedOpen);
    let (status, _, body) = http(&base, "GET", "/", &[]).await;
    assert_eq!((status, body.as_str()), (200, "the service itself"));
}

/// `name`'s entry in `/snapshot.json`'s `breakers`.
async fn snapshot_of(base: &str, name: &str) -> Value {
    let (_, _, body) = http(base, "GET", "/snapshot.json", &[]).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    v["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {body}"))
        .clone()
}

/// Mounted with `nest_service` (as the module docs say), the page answers at `/breakers` and
/// at `/breakers/`, and its routes below both; mounted with `nest`, at `/breakers`.
#[tokio::test(start_paused = true)]
async fn mounted_at_a_path_the_page_answers_with_and_without_the_trailing_slash() {
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::mounted", slow_to_open(1));
    succeed(&b).await;
    let app = Router::new()
        .route("/", get(|| async { "the service itself" }))
        .nest_service("/breakers", breaker::dashboard::router())
        .nest("/nested", breaker::dashboard::router());
    let (base, _) = serve(app).await;
    for path in ["/breakers", "/breakers/", "/nested"] {
        let (status, headers, page) = http(&base, "GET", path, &[]).await;
        assert_eq!(status, 200, "GET {path}");
        assert!(headers["content-type"].starts_with("text/html"), "{path}");
        assert!(page.contains("<title>Circuit breakers</title>"), "{path}");
    }
    for path in ["/breakers/snapshot.json", "/nested/snapshot.json"] {
        let (status, _, body) = http(&base, "GET", path, &[]).await;
        assert_eq!(status, 200, "GET {path}");
        assert!(body.contains("dash_http::mounted"), "{path}: {body}");
    }
    let (status, _, body) = http(&base, "GET", "/", &[]).await;
    assert_eq!((status, body.as_str()), (200, "the service itself"));
}

#[tokio::test(start_paused = true)]
async fn snapshot_json_lists_live_breakers_in_the_documented_shape() {
    let _one = ONE_AT_A_TIME.lock().await;
    let b = Breaker::new("dash_http::snapshot", slow_to_open(2));
    succeed(&b).await;
    fail(&b).await;
    fail(&b).await;
    let (base, _) = serve(breaker::dashboard::router()).await;
    let (status, headers, _) = http(&base, "GET", "/snapshot.json", &[]).await;
    assert_eq!(status, 200);
    assert!(headers["content-type"].starts_with("application/json"));
    let mine = snapshot_of(&base, "dash_http::snapshot").await;
    assert_eq!(mine["state"], "open");
    assert_eq!(mine["stats"]["calls"], 3);
    assert_eq!(mine["stats"]["failures"], 2);
    assert_eq!(mine["retry_in_ms"], 3_600_000);
    assert!(mine["failure_rate"].as_f64().unwrap() > 0.0);
    assert_eq!(mine["config"]["threshold"], 2, "the configuration in force");
    assert_eq!(mine["config"]["cool_off"], "1h");

    // Reconfigured: the snapshot shows the configuration now in force.
    b.reconfigure(slow_to_open(7).dry_run(true)).unwrap();
    let mine = snapshot_of(&base, "dash_http::snapshot").await;
    assert_eq!(mine["config"]["threshold"], 7);
    assert_eq!(mine["config"]["dry_run"], true);
    assert_eq!(mine["state"], "open", "its state kept");

    drop(b);
    let (_, _, body) = http(&base, "GET", "/snapshot.json", &[]).await;
    assert!(
        !body.contains("dash_http::snapshot"),
        "a dropped breaker is no longer listed"
    );
}

/// Issue 35, finding 2: 100 000 keyed breakers made `/snapshot.json` 30 MB, written on the
/// async workers (an unrelated route waited seconds). A keyed breaker is now one summary,
/// its keys that are not closed listed (at most `limit`), built off the async workers.
/// Real time and a one-thread runtime: a snapshot built on that thread would hold every
/// other route until it is done.
#[tokio::test]
async fn a_snapshot_of_100_000_keyed_breakers_is_bounded_and_holds_up_no_other_route() {
    let _one = ONE_AT_A_TIME.lock().await;
    const KEYS: u64 = 100_000;
    let hosts = breaker::KeyedBreaker::<u64>::new(
        "dash_keyed::hosts",
        Config::default().threshold(1).max_keys(2 * KEYS as usize),
    );
    for i in 0..KEYS {
        hosts.breaker(&i);
    }
    for i in [10, 20, 30, 40, 50] {
        let _ = hosts.call_sync(&i, || Err::<(), _>("down"));
    }
    hosts.breaker(&7).handle().force_open();
    let app = Router::new()
        .route("/ping", get(|| async { "pong" }))
        .merge(breaker::dashboard::router());
    let (base, _) = serve(app).await;

    let (status, headers, body) = http(&base, "GET", "/snapshot.json", &[]).await;
    assert_eq!(status, 200);
    assert!(headers["content-type"].starts_with("application/json"));
    assert!(body.len() < 1_000_000, "{} bytes", body.len());
    let v: Value = serde_json::from_str(&body).unwrap();
    let summary = v["keyed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "dash_keyed::hosts")
        .unwrap()
        .clone();
    assert_eq!(summary["keys"], KEYS);
    assert_eq!(summary["states"]["closed"], KEYS - 6);
    assert_eq!(summary["states"]["open"], 5);
    assert_eq!(summary["states"]["forced_open"], 1);
    assert_eq!(
        (&summary["not_closed"], &summary["listed"]),
        (&json!(6), &json!(6))
    );
    let listed = |v: &Value| {
        v["breakers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["keyed"] == "dash_keyed::hosts")
            .map(|b| b["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        listed(&v),
        ["10", "20", "30", "40", "50", "7"].map(|k| format!("dash_keyed::hosts[{k}]")),
        "open ones first, then forced open"
    );

    // `?limit=N`: at most N keys a keyed breaker, the total still given.
    let (_, _, body) = http(&base, "GET", "/snapshot.json?limit=2", &[]).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listed(&v).len(), 2);
    let summary = &v["keyed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "dash_keyed::hosts")
        .unwrap();
    assert_eq!(
        (&summary["not_closed"], &summary["listed"]),
        (&json!(6), &json!(2))
    );
    let (status, _, _) = http(&base, "GET", "/snapshot.json?limit=many", &[]).await;
    assert_eq!(status, 400);

    // Eight snapshots at once, and meanwhile another route answers at once. Loosely, for a
    // loaded machine: built on this one thread, the eight held it 32.7 s in a debug build.
    let snapshots: Vec<_> = (0..8)
        .map(|_| {
            let base = base.clone();
            tokio::spawn(async move { http(&base, "GET", "/snapshot.json", &[]).await.0 })
        })
        .collect();
    tokio::task::yield_now().await;
    let started = std::time::Instant::now();
    let (status, _, body) = http(&base, "GET", "/ping", &[]).await;
    let took = started.elapsed();
    assert_eq!((status, body.as_str()), (200, "pong"));
    assert!(
        took < Duration::from_secs(2),
        "the other route took {took:?}"
    );
    for s in snapshots {
        assert_eq!(s.await.unwrap(), 200);
    }
    drop(hosts);
}

/// Reads server-sent events until `done` says so; bounded by the bytes that arrive.
///
/// Everything here runs on the test's paused clock, so the timeout only fires when nothing
/// else can happen any more: it turns a missing event into a failure instead of a hang.
async fn read_events(
    base: &str,
    last_event_id: Option<u64>,
    done: impl FnMut(&[Value]) -> bool,
    between: impl FnMut(usize),
) -> Vec<Value> {
    tokio::time::timeout(
        Duration::from_secs(600),
        read_events_forever(base, last_event_id, done, between),
    )
    .await
    .expect("the events never came")
}

async fn read_events_forever(
    base: &str,
    last_event_id: Option<u64>,
    mut done: impl FnMut(&[Value]) -> bool,
    mut between: impl FnMut(usize),
) -> Vec<Value> {
    let addr = base.trim_start_matches("http://");
    let stream = TcpStream::connect(addr).await.unwrap();
    let mut stream = BufReader::new(stream);
    let mut req = format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n");
    if let Some(id) = last_event_id {
        req.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    req.push_str("\r\n");
    stream.get_mut().write_all(req.as_bytes()).await.unwrap();
    let mut events = Vec::new();
    let mut lines = 0;
    let mut line = String::new();
    while !done(&events) {
        line.clear();
        assert!(
            stream.read_line(&mut line).await.unwrap() > 0,
            "stream ended"
        );
        lines += 1;
        assert!(lines < 10_000, "no such events in {lines} lines");
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            events.push(serde_json::from_str(data).unwrap());
        }
        if line.trim_end() == ": breaker" {
            between(events.len()); // the stream is open: now make something happen
        }
    }
    events
}

#[tokio::test(start_paused = true)]
async fn events_stream_transitions_live_and_replay_what_a_reconnecting_client_missed() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (base, _) = serve(breaker::dashboard::router()).await;
    let b = Breaker::new("dash_http::events", Config::default().threshold(1));
    let mine = |e: &[Value]| {
        e.iter()
            .filter(|e| e["breaker"] == "dash_http::events")
            .cloned()
            .collect::<Vec<_>>()
    };
    let handle = b.handle();
    let events = read_events(
        &base,
        None,
        |e| !mine(e).is_empty(),
        |_| handle.force_open(),
    )
    .await;
    let first = mine(&events).remove(0);
    assert_eq!(first["from"], "closed");
    assert_eq!(first["to"], "forced_open");
    assert_eq!(first["cause"], "manual control");
    assert!(first["at_ms"].as_u64().unwrap() > 1_600_000_000_000);
    let id = first["id"].as_u64().unwrap();

    // Two more while nobody listens; a client that saw `id` gets exactly those, in order.
    handle.reset();
    fail(&b).await;
    let replay = read_events(&base, Some(id), |e| mine(e).len() >= 2, |_| {}).await;
    let replay = mine(&replay);
    assert_eq!(
        replay
            .iter()
            .map(|e| (e["from"].as_str().unwrap(), e["to"].as_str().unwrap()))
            .collect::<Vec<_>>(),
        [("forced_open", "closed"), ("closed", "open")]
    );
    assert!(replay.iter().all(|e| e["id"].as_u64().unwrap() > id));
    assert_eq!(replay[1]["cool_off_ms"], 10_000);
}

// ---- the page in headless chromium ----------------------------------------------------------

const CHROMIUM: &str = "/usr/bin/chromium";

/// A fresh profile directory, removed afterwards.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "breaker-chromium-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// Headless chromium and one page of it, over the DevTools protocol.
struct Chromium {
    child: std::process::Child,
    _profile: TempDir,
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    next_id: AtomicU64,
    session: String,
    /// Every URL the page asked for (`Network.requestWillBeSent`).
    requests: Arc<Mutex<Vec<String>>>,
}

impl Chromium {
    async fn launch() -> Chromium {
        assert!(
            std::path::Path::new(CHROMIUM).exists(),
            "the dashboard test drives a real browser and found none at {CHROMIUM}: \
             install it with `apt-get install -y chromium`"
        );
        let profile = TempDir::new();
        let mut child = std::process::Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                "--window-size=1440,900",
            ])
            .arg(format!("--user-data-dir={}", profile.0.display()))
            .arg("about:blank")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {CHROMIUM} ({e}): install it with `apt-get install -y chromium`"
                )
            });
        // It prints where its DevTools endpoint listens: a thread reads up to that line, then
        // keeps draining its stderr so it never blocks on a full pipe.
        let stderr = child.stderr.take().unwrap();
        let (tx, listening) = oneshot::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut said = Vec::new();
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                match (line.find("ws://"), tx.take()) {
                    (Some(at), Some(tx)) if line.contains("DevTools listening") => {
                        let _ = tx.send(Ok(line[at..].trim().to_owned()));
                    }
                    (_, t) => {
                        tx = t;
                        said.push(line);
                    }
                }
            }
            if let Some(tx) = tx {
                let _ = tx.send(Err(said.join("\n")));
            }
        });
        let ws_url = match listening.await.unwrap() {
            Ok(url) => url,
            Err(said) => panic!("chromium exited before listening:\n{said}"),
        };

        let (ws, _) = tokio_tungstenite::connect_async(ws_url.as_str())
            .await
            .unwrap();
        let (mut sink, mut source) = ws.split();
        let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(m) = outgoing.recv().await {
                if sink.send(m).await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Arc::default();
        let requests = Arc::new(Mutex::new(Vec::new()));
        {
            let (pending, requests) = (pending.clone(), requests.clone());
            tokio::spawn(async move {
                while let Some(Ok(m)) = source.next().await {
                    let Message::Text(text) = m else { continue };
                    let v: Value = serde_json::from_str(text.as_str()).unwrap();
                    if let Some(id) = v["id"].as_u64() {
                        if let Some(tx) = pending.lock().unwrap().remove(&id) {
                            let _ = tx.send(v);
                        }
                    } else if v["method"] == "Network.requestWillBeSent" {
                        let url = v["params"]["request"]["url"].as_str().unwrap_or("?");
                        requests.lock().unwrap().push(url.to_owned());
                    }
                }
            });
        }
        let mut browser = Chromium {
            child,
            _profile: profile,
            out,
            pending,
            next_id: AtomicU64::new(1),
            session: String::new(),
            requests,
        };
        let target = browser
            .command("Target.createTarget", json!({ "url": "about:blank" }))
            .await;
        let attached = browser
            .command(
                "Target.attachToTarget",
                json!({ "targetId": target["targetId"], "flatten": true }),
            )
            .await;
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        browser.command("Network.enable", json!({})).await;
        browser.command("Page.enable", json!({})).await;
        browser
            .command(
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": false }),
            )
            .await;
        browser
    }

    /// One protocol command (on the page's session once there is one); its `result`.
    async fn command(&self, method: &str, params: Value) -> Value {
        self.send(method, params, Some(&self.session)).await
    }

    async fn send(&self, method: &str, params: Value, session: Option<&str>) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session.filter(|s| !s.is_empty()) {
            msg["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.out.send(Message::text(msg.to_string())).unwrap();
        let answer = rx.await.expect("chromium closed the connection");
        assert!(answer["error"].is_null(), "{method}: {}", answer["error"]);
        answer["result"].clone()
    }

    /// Evaluates `expression` in the page (awaiting a promise) and returns its value.
    async fn eval(&self, expression: &str) -> Value {
        let r = self
            .command(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            )
            .await;
        assert!(
            r["exceptionDetails"].is_null(),
            "{expression}\nthrew {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Checks `condition` (a JS expression) in the page until it is truthy, up to 40 times per
    /// round, 25 ms apart in the browser, for at most 30 rounds; its value, or a panic that
    /// shows `show` (a JS expression) as it last was.
    /// Refreshes the page and waits until `name`'s row is in `class` with `transitions`
    /// listed; the row.
    async fn row_after_refresh(&self, name: &str, class: &str, transitions: usize) -> Value {
        self.eval("dashboard.refresh()").await;
        self.wait_for(
            &format!(
                "{r} && {r}.class === '{class}' && {l}.length === {transitions} && {r}",
                r = row(name),
                l = listed(name)
            ),
            &format!("[{}, {}]", row(name), listed(name)),
        )
        .await
    }

    /// Runs `click` (a control's button), waits for the confirmation dialog, confirms.
    async fn confirm(&self, click: &str) {
        self.asked(click).await;
        self.eval("document.getElementById('confirm-ok').click()")
            .await;
    }

    /// Runs `click` (a control's button) and waits for the confirmation dialog; its text.
    async fn asked(&self, click: &str) -> String {
        assert_eq!(self.eval(click).await, true, "no such button: {click}");
        let text = self
            .wait_for(
                "document.getElementById('confirm').open && document.getElementById('confirm-text').textContent",
                "document.getElementById('confirm').outerHTML",
            )
            .await;
        text.as_str().unwrap_or_default().to_owned()
    }

    /// Waits for the page's toast to start with `start` (an earlier action's toast may
    /// still show, or come after the row it changed); its text.
    async fn toast(&self, start: &str) -> String {
        let start = serde_json::to_string(start).unwrap();
        let text = self
            .wait_for(
                &format!(
                    "(() => {{ const t = document.getElementById('toast'); \
                       return !t.hidden && t.textContent.startsWith({start}) && t.textContent; }})()"
                ),
                "document.getElementById('toast').textContent",
            )
            .await;
        text.as_str().unwrap_or_default().to_owned()
    }

    /// Waits until `name`'s row is in `class`.
    async fn row_in(&self, name: &str, class: &str) {
        self.wait_for(
            &format!("{r} && {r}.class === '{class}'", r = row(name)),
            &row(name),
        )
        .await;
    }

    async fn wait_for(&self, condition: &str, show: &str) -> Value {
        let round = format!(
            "new Promise((done) => {{ let n = 0; const check = () => {{ \
               let v; try {{ v = ({condition}); }} catch (e) {{ v = null; }} \
               if (v || ++n >= 40) done(v || null); else setTimeout(check, 25); }}; check(); }})"
        );
        for _ in 0..30 {
            let v = self.eval(&round).await;
            if !v.is_null() && v != json!(false) {
                return v;
            }
        }
        panic!(
            "the page never showed {condition}\nit shows: {:#}",
            self.eval(show).await
        );
    }

    /// Makes the page `width` CSS pixels wide (900 high).
    async fn viewport(&self, width: u32) {
        self.command(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false }),
        )
        .await;
    }

    async fn open(&self, url: &str) {
        self.command("Page.navigate", json!({ "url": url })).await;
        self.wait_for(
            "document.readyState === 'complete' && window.dashboard",
            "document.readyState",
        )
        .await;
    }

    async fn screenshot(&self, path: &std::path::Path) {
        let shot = self
            .command(
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": true }),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Closes the browser the way it likes, so it ends its helper processes itself.
    async fn close(mut self) {
        let (tx, rx) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.pending.lock().unwrap().insert(id, tx);
        let msg = json!({ "id": id, "method": "Browser.close", "params": {} });
        if self.out.send(Message::text(msg.to_string())).is_ok() {
            let _ = rx.await; // answered, or the connection closed
        }
        let _ = self.child.wait();
    }
}

/// Chromium goes with the test, passed or failed, passed or failed, before its profile directory.
impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the page shows of one breaker's row, as JSON, or `null` when it has no row.
fn row(name: &str) -> String {
    let name = serde_json::to_string(name).unwrap();
    format!(
        "(() => {{ for (const tr of document.querySelectorAll('#rows tr')) {{ \
           const c = (k) => tr.querySelector('td.' + k).textContent; \
           if (c('name') === {name}) return {{ class: tr.className, \
             state: tr.querySelector('td.state .badge').textContent, \
             badge: tr.querySelector('td.state .badge').className, \
             calls: c('calls'), failed: c('failed'), rejected: c('rejected'), rate: c('rate'), \
             retry: c('retry'), timeline: !!tr.querySelector('td.timeline canvas') }}; }} \
           return null; }})()"
    )
}

/// The transitions the page lists for `name`, newest first, as `[from, to]` pairs.
fn listed(name: &str) -> String {
    let name = serde_json::to_string(name).unwrap();
    format!(
        "[...document.querySelectorAll('#transitions li')] \
           .filter((li) => li.querySelector('.tname').textContent === {name}) \
           .map((li) => [li.dataset.from, li.dataset.to])"
    )
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
}

#[tokio::test(start_paused = true)]
async fn the_page_shows_a_breaker_live_through_every_state_in_a_real_browser() {
    let _one = ONE_AT_A_TIME.lock().await;
    const NAME: &str = "dash_page::payments";
    const HOSTILE: &str =
        "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
    let (base, seen) = serve(breaker::dashboard::router()).await;
    let payments = Breaker::new(NAME, slow_to_open(2));
    let hostile = Breaker::new(HOSTILE, slow_to_open(1));
    succeed(&payments).await;
    succeed(&hostile).await;

    let browser = Chromium::launch().await;
    browser.open(&format!("{base}/")).await;
    browser.eval("dashboard.refresh()").await;
    let shown = browser
        .wait_for(
            &format!("{r} && {r}.class === 'closed' && {r}", r = row(NAME)),
            "document.body.innerText",
        )
        .await;
    assert_eq!(shown["state"], "closed");
    assert_eq!(shown["badge"], "badge closed");
    assert_eq!(
        (&shown["calls"], &shown["failed"], &shown["rejected"]),
        (&json!("1"), &json!("0"), &json!("0"))
    );
    assert_eq!(shown["rate"], "0.0%");
    assert_eq!(shown["retry"], "");
    assert_eq!(shown["timeline"], true);
    assert_eq!(
        browser
            .eval("[dashboard.controls, document.querySelectorAll('#rows button').length]")
            .await,
        json!([false, 0]),
        "router() draws no control buttons"
    );
    browser
        .wait_for(
            "document.getElementById('live').textContent === 'live'",
            "document.getElementById('live').textContent",
        )
        .await;

    // closed → open: the transition arrives over /events and the row follows.
    fail(&payments).await;
    fail(&payments).await;
    assert_eq!(payments.state(), State::Open);
    let shown = browser.row_after_refresh(NAME, "open", 1).await;
    assert_eq!(shown["state"], "open");
    assert_eq!(
        (&shown["calls"], &shown["failed"]),
        (&json!("3"), &json!("2"))
    );
    // An hour of cool-off, less what the clock moved while the page loaded.
    let retry = shown["retry"].as_str().unwrap();
    assert!(
        retry == "60 min 00 s" || retry.starts_with("59 min "),
        "time left open: {retry}"
    );
    assert_eq!(
        browser.eval(&listed(NAME)).await,
        json!([["closed", "open"]])
    );
    let rejected = payments.call(async { Ok::<_, &str>(()) }).await;
    assert!(rejected.is_err());
    browser.eval("dashboard.refresh()").await;
    let shown = browser
        .wait_for(
            &format!("{r} && {r}.rejected === '1' && {r}", r = row(NAME)),
            &row(NAME),
        )
        .await;
    assert_eq!(shown["calls"], "4");
    browser
        .screenshot(&target_dir().join("dashboard-open.png"))
        .await;

    // open → half-open once the cool-off is over (reading the state moves it).
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(payments.state(), State::HalfOpen);
    let shown = browser.row_after_refresh(NAME, "half_open", 2).await;
    assert_eq!(shown["state"], "half-open");

    // half-open → closed: the probe succeeds.
    succeed(&payments).await;
    assert_eq!(payments.state(), State::Closed);
    let shown = browser.row_after_refresh(NAME, "closed", 3).await;
    assert_eq!(
        (&shown["calls"], &shown["failed"], &shown["rejected"]),
        (&json!("5"), &json!("2"), &json!("1"))
    );
    assert_eq!(
        browser.eval(&listed(NAME)).await,
        json!([
            ["half_open", "closed"],
            ["open", "half_open"],
            ["closed", "open"]
        ]),
        "newest first"
    );

    // A name full of markup is shown as text, in its row and in the transition list.
    hostile.handle().force_open();
    browser.eval("dashboard.refresh()").await;
    let shown = browser
        .wait_for(
            &format!(
                "{r} && {r}.class === 'forced_open' && {l}.length === 1 && {r}",
                r = row(HOSTILE),
                l = listed(HOSTILE)
            ),
            &format!("[{}, {}]", row(HOSTILE), listed(HOSTILE)),
        )
        .await;
    assert_eq!(shown["state"], "forced open");
    assert_eq!(
        browser
            .eval("[window.__pwned === undefined, document.querySelectorAll('img').length, document.scripts.length]")
            .await,
        json!([true, 0, 1]),
        "the name ran as markup"
    );

    // Many breakers: at most 200 rows drawn, with a note; the filter narrows the list; the
    // state chips filter by state; open ones come first, or any other order.
    let many: Vec<Breaker> = (0..230)
        .map(|i| Breaker::new(format!("dash_many::b{i:03}"), slow_to_open(1)))
        .collect();
    many[117].handle().force_open();
    browser.eval("dashboard.refresh()").await;
    let shown = browser
        .wait_for(
            "document.querySelectorAll('#rows tr').length === 200 && \
             !document.getElementById('more').hidden && \
             [document.querySelector('#rows tr td.name').textContent, \
              document.getElementById('more').textContent]",
            "[document.querySelectorAll('#rows tr').length, document.getElementById('more').textContent]",
        )
        .await;
    assert!(
        shown[1].as_str().unwrap().starts_with("Showing 200 of "),
        "{shown}"
    );
    let set_filter = |q: &str| {
        format!(
            "(() => {{ const f = document.getElementById('filter'); f.value = {q:?}; \
               f.dispatchEvent(new Event('input')); \
               return [...document.querySelectorAll('#rows td.name')].map((td) => td.textContent); }})()"
        )
    };
    let names = browser.eval(&set_filter("dash_many::b07")).await;
    assert_eq!(
        names,
        json!((70..80)
            .map(|i| format!("dash_many::b{i:03}"))
            .collect::<Vec<_>>())
    );
    assert_eq!(
        browser.eval("document.getElementById('more').hidden").await,
        true
    );
    let names = browser.eval(&set_filter("dash_many::")).await;
    assert_eq!(names[0], "dash_many::b117", "open ones first: {names}");
    assert_eq!(names.as_array().unwrap().len(), 200);
    browser
        .eval("(() => { const s = document.getElementById('sort'); s.value = 'name'; s.dispatchEvent(new Event('change')); })()")
        .await;
    let names = browser
        .eval("[...document.querySelectorAll('#rows td.name')].slice(0, 3).map((td) => td.textContent)")
        .await;
    assert_eq!(
        names,
        json!(["dash_many::b000", "dash_many::b001", "dash_many::b002"])
    );
    browser.eval(&set_filter("dash_page::pay")).await;
    assert_eq!(
        browser.eval(&set_filter("dash_page::pay")).await,
        json!([NAME])
    );
    browser.eval(&set_filter("")).await;
    let forced = browser
        .eval(
            "(() => { document.querySelector('#summary .chip[data-state=forced_open]').click(); \
               return [...document.querySelectorAll('#rows tr')].map((tr) => tr.className); })()",
        )
        .await;
    assert!(
        forced.as_array().unwrap().len() >= 2
            && forced
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c == "forced_open"),
        "{forced}"
    );
    browser
        .eval("document.querySelector('#summary .chip[data-state=forced_open]').click()")
        .await;
    browser
        .eval("(() => { const s = document.getElementById('sort'); s.value = 'state'; s.dispatchEvent(new Event('change')); })()")
        .await;
    let first = browser
        .eval("document.querySelector('#rows tr').className")
        .await;
    assert_ne!(first, "closed", "open ones first");
    drop(many);

    browser
        .screenshot(&target_dir().join("dashboard.png"))
        .await;

    // The page asked nothing of any host but this server.
    let requests = browser.requests.lock().unwrap().clone();
    browser.close().await;
    assert!(!requests.is_empty());
    let foreign: Vec<_> = requests
        .iter()
        .filter(|u| !u.starts_with(&format!("{base}/")) && !u.starts_with("data:"))
        .collect();
    assert!(foreign.is_empty(), "requests elsewhere: {foreign:?}");
    let paths = seen.lock().unwrap().clone();
    assert!(paths.contains(&"/".to_owned()) && paths.contains(&"/events".to_owned()));
    let unexpected: Vec<_> = paths
        .iter()
        .filter(|p| !["/", "/snapshot.json", "/events"].contains(&p.as_str()))
        .collect();
    assert!(unexpected.is_empty(), "unexpected requests: {unexpected:?}");
}

/// Clicks the `action` button in `name`'s row.
fn click(name: &str, selector: &str) -> String {
    let name = serde_json::to_string(name).unwrap();
    format!(
        "(() => {{ for (const tr of document.querySelectorAll('#rows tr')) \
           if (tr.querySelector('td.name').textContent === {name}) \
             {{ tr.querySelector({selector:?}).click(); return true; }} \
           return false; }})()"
    )
}

#[tokio::test(start_paused = true)]
async fn the_control_buttons_ask_for_confirmation_then_act() {
    let _one = ONE_AT_A_TIME.lock().await;
    // Mounted under a prefix, and a name that must be percent-encoded in the control's path.
    const NAME: &str = "dash_page::controlled[a/b c?]";
    let b = Breaker::new(NAME, slow_to_open(5));
    succeed(&b).await;
    let app = Router::new().nest("/ops/breakers", breaker::dashboard::router_with_controls());
    let (base, seen) = serve(app).await;
    let browser = Chromium::launch().await;
    browser.open(&format!("{base}/ops/breakers")).await;
    browser.eval("dashboard.refresh()").await;
    browser.row_in(NAME, "closed").await;
    assert_eq!(browser.eval("dashboard.controls").await, json!(true));

    // Force open, then think better of it: nothing happens.
    let asked = browser.asked(&click(NAME, "button.force_open")).await;
    assert!(
        asked.contains(NAME) && asked.starts_with("Force open"),
        "{asked}"
    );
    browser
        .eval("document.getElementById('confirm-cancel').click()")
        .await;
    assert_eq!(
        browser
            .eval("document.getElementById('confirm').open")
            .await,
        false
    );
    browser.eval("dashboard.refresh()").await;
    assert_eq!(b.state(), State::Closed);

    // Force open, confirmed.
    browser.confirm(&click(NAME, "button.force_open")).await;
    browser.row_in(NAME, "forced_open").await;
    assert_eq!(b.state(), State::ForcedOpen);

    // Reset, confirmed: closed, counts cleared.
    browser.confirm(&click(NAME, "button.reset")).await;
    let shown = browser
        .wait_for(
            &format!(
                "{r} && {r}.class === 'closed' && {r}.calls === '0' && {r}",
                r = row(NAME)
            ),
            &row(NAME),
        )
        .await;
    assert_eq!(shown["state"], "closed");
    assert_eq!(b.state(), State::Closed);
    browser.close().await;
    let paths = seen.lock().unwrap().clone();
    let posts: Vec<_> = paths
        .iter()
        .filter(|p| p.contains("/breakers/dash"))
        .collect();
    assert_eq!(
        posts,
        [
            "/ops/breakers/breakers/dash_page%3A%3Acontrolled%5Ba%2Fb%20c%3F%5D/force_open",
            "/ops/breakers/breakers/dash_page%3A%3Acontrolled%5Ba%2Fb%20c%3F%5D/reset",
        ]
    );
    assert!(
        paths.iter().all(|p| p.starts_with("/ops/breakers")),
        "{paths:?}"
    );
}

/// The module docs' Basic auth check ("ops", "secret").
async fn operators_only(req: Request, next: Next) -> Response {
    let expected = HeaderValue::from_static("Basic b3BzOnNlY3JldA==");
    if req.headers().get(header::AUTHORIZATION) == Some(&expected) {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, r#"Basic realm="breakers""#)],
    )
        .into_response()
}

/// Opened at `http://ops:secret@127.0.0.1:PORT/ops/breakers` (issue 22): a `fetch` of a URL
/// relative to that address carries the credentials and the browser refuses it, which left
/// the page "server unreachable" with no rows. Behind Basic auth, so each of the page's
/// requests (snapshot, events, a control) must also be let in.
#[tokio::test(start_paused = true)]
async fn opened_at_a_url_with_credentials_the_page_shows_and_controls_its_breakers() {
    let _one = ONE_AT_A_TIME.lock().await;
    const NAME: &str = "dash_page::with_credentials";
    let b = Breaker::new(NAME, slow_to_open(5));
    succeed(&b).await;
    let app = Router::new().nest(
        "/ops/breakers",
        breaker::dashboard::router_with_controls().layer(middleware::from_fn(operators_only)),
    );
    let (base, seen) = serve(app).await;
    let with_credentials = base.replacen("http://", "http://ops:secret@", 1);
    let browser = Chromium::launch().await;
    browser
        .open(&format!("{with_credentials}/ops/breakers"))
        .await;
    browser.eval("dashboard.refresh()").await;
    let shown = browser
        .wait_for(
            &format!("{r} && {r}.class === 'closed' && {r}", r = row(NAME)),
            "[document.getElementById('updated').textContent, document.body.innerText]",
        )
        .await;
    assert_eq!(shown["calls"], "1");
    assert_ne!(
        browser
            .eval("document.getElementById('updated').textContent")
            .await,
        "server unreachable"
    );
    browser
        .wait_for(
            "document.getElementById('live').textContent === 'live'",
            "document.getElementById('live').textContent",
        )
        .await;
    browser.confirm(&click(NAME, "button.force_open")).await;
    browser.row_in(NAME, "forced_open").await;
    assert_eq!(b.state(), State::ForcedOpen);
    browser.close().await;
    let paths = seen.lock().unwrap().clone();
    for path in [
        "/ops/breakers/snapshot.json",
        "/ops/breakers/events",
        "/ops/breakers/breakers/dash_page%3A%3Awith_credentials/force_open",
    ] {
        assert!(paths.iter().any(|p| p == path), "{path} in {paths:?}");
    }
}

/// At 1300 px wide (issue 22) with controls, long names and every column filled, the table
/// fits: no column is cut off or scrolled out of view, the Control column included. Also at
/// 1400 px, the narrowest page that keeps the transitions beside the table, and at 1024 px.
/// Mounted with `nest_service` and opened at its address with the trailing slash.
#[tokio::test(start_paused = true)]
async fn at_1300_px_wide_every_column_is_in_view() {
    let _one = ONE_AT_A_TIME.lock().await;
    let long = Breaker::new(
        "dash_page::wide::a_rather_long_module_path::with_a_long_function_name[tenant-4711]",
        slow_to_open(1),
    );
    let forced = Breaker::new("dash_page::wide::forced", slow_to_open(1));
    let busy = Breaker::new("dash_page::wide::busy", slow_to_open(1_000_000));
    succeed(&long).await;
    fail(&long).await;
    for _ in 0..2000 {
        let _ = long.call(async { Ok::<_, &str>(()) }).await;
    }
    forced.handle().force_open();
    for _ in 0..3000 {
        succeed(&busy).await;
        fail(&busy).await;
    }
    let app = Router::new().nest_service("/breakers", breaker::dashboard::router_with_controls());
    let (base, _) = serve(app).await;
    let browser = Chromium::launch().await;
    for width in [1300, 1400, 1024] {
        browser.viewport(width).await;
        browser.open(&format!("{base}/breakers/")).await;
        browser.eval("dashboard.refresh()").await;
        browser
            .wait_for(
                "document.querySelectorAll('#rows tr td.actions button').length >= 9",
                "document.body.innerText",
            )
            .await;
        browser
            .screenshot(&target_dir().join(format!("dashboard-{width}.png")))
            .await;
        // The right edges of the Control column's cells, of the table's scroll container's
        // inside, and of the viewport.
        let fit = browser
            .eval(
                "(() => { const sec = document.querySelector('section'); \
                   const inner = sec.getBoundingClientRect().left + sec.clientLeft + sec.clientWidth; \
                   const head = document.getElementById('actions-head'); \
                   const cells = [...document.querySelectorAll('#rows td.actions')] \
                     .map((td) => td.getBoundingClientRect().right); \
                   return { viewport: document.documentElement.clientWidth, inner, \
                     scroll: sec.scrollWidth, client: sec.clientWidth, \
                     head: head.getBoundingClientRect().right, headHidden: head.hidden, \
                     cells: Math.max(...cells), page: document.documentElement.scrollWidth }; })()",
            )
            .await;
        let n = |k: &str| fit[k].as_f64().unwrap();
        assert_eq!(n("viewport"), f64::from(width), "{fit}");
        assert_eq!(fit["headHidden"], false, "{fit}");
        assert!(
            n("scroll") <= n("client"),
            "{width} px: the table scrolls: {fit}"
        );
        assert!(
            n("head") <= n("inner") + 0.5,
            "{width} px: Control is cut off: {fit}"
        );
        assert!(
            n("cells") <= n("inner") + 0.5,
            "{width} px: a button is cut off: {fit}"
        );
        assert!(
            n("page") <= n("viewport"),
            "{width} px: the page scrolls sideways: {fit}"
        );
    }
    browser.close().await;
}

/// Issue 35, findings 2 and 6 on the page: a keyed breaker is one line of counts, with rows
/// for its keys that are not closed only, and the page asks for no more than it draws; names
/// that hide or reverse text are shown escaped (no row looks like `shop::inventory` but
/// it); breakers named `.` and `..` are controlled like any other.
#[tokio::test(start_paused = true)]
async fn the_page_summarises_keyed_breakers_escapes_look_alikes_and_controls_dot_names() {
    let _one = ONE_AT_A_TIME.lock().await;
    const REAL: &str = "dash_names::shop::inventory";
    const REVERSED: &str = "\u{202E}yrotnevni::pohs::dash_names";
    const INVISIBLE: &str = "dash_names::shop::inventory\u{200B}";
    let real = Breaker::new(REAL, slow_to_open(5));
    let reversed = Breaker::new(REVERSED, slow_to_open(5));
    let invisible = Breaker::new(INVISIBLE, slow_to_open(5));
    let dot = Breaker::new(".", slow_to_open(5));
    let dots = Breaker::new("..", slow_to_open(5));
    for b in [&real, &reversed, &invisible, &dot, &dots] {
        succeed(b).await;
    }
    let keys = breaker::KeyedBreaker::<u64>::new("dash_names::keyed", slow_to_open(1));
    for i in 0..500 {
        keys.breaker(&i);
    }
    for i in [3, 5, 8] {
        let _ = keys.call_sync(&i, || Err::<(), _>("down"));
    }

    let (base, _) = serve(breaker::dashboard::router_with_controls()).await;
    let browser = Chromium::launch().await;
    browser.open(&format!("{base}/")).await;
    browser.eval("dashboard.refresh()").await;
    browser.row_in("dash_names::keyed[8]", "open").await;

    // The look-alikes, escaped: one row reads `shop::inventory`, the others show why not.
    let names = browser
        .eval("[...document.querySelectorAll('#rows td.name')].map((td) => td.textContent)")
        .await;
    let names: Vec<String> = serde_json::from_value(names).unwrap();
    assert_eq!(
        names.iter().filter(|n| n.as_str() == REAL).count(),
        1,
        "{names:?}"
    );
    assert!(
        names.contains(&"\\u{202E}yrotnevni::pohs::dash_names".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"dash_names::shop::inventory\\u{200B}".to_owned()),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .all(|n| !n.contains('\u{202E}') && !n.contains('\u{200B}')),
        "{names:?}"
    );
    let asked = browser
        .asked(&click(
            "\\u{202E}yrotnevni::pohs::dash_names",
            "button.force_open",
        ))
        .await;
    assert!(
        asked.contains("“\\u{202E}yrotnevni::pohs::dash_names”") && !asked.contains('\u{202E}'),
        "{asked}"
    );
    browser
        .eval("document.getElementById('confirm-cancel').click()")
        .await;

    // The keyed breaker: its counts on one line, rows for its three open keys only.
    let line = browser
        .eval(
            "document.querySelector('#keyed .family[data-name=\"dash_names::keyed\"]').textContent",
        )
        .await;
    assert_eq!(line, "dash_names::keyed500 keys: 3 open · 497 closed");
    let key_rows = browser
        .eval(
            "[...document.querySelectorAll('#rows td.name')].map((td) => td.textContent) \
               .filter((n) => n.startsWith('dash_names::keyed['))",
        )
        .await;
    assert_eq!(
        key_rows,
        json!([
            "dash_names::keyed[3]",
            "dash_names::keyed[5]",
            "dash_names::keyed[8]"
        ])
    );
    let polled = browser.requests.lock().unwrap().clone();
    assert!(
        polled
            .iter()
            .any(|u| u == &format!("{base}/snapshot.json?limit=200")),
        "the page asks for what it draws: {polled:?}"
    );

    // `.` and `..`, forced open from their rows.
    for (name, b) in [(".", &dot), ("..", &dots)] {
        browser.confirm(&click(name, "button.force_open")).await;
        browser.row_in(name, "forced_open").await;
        assert_eq!(b.state(), State::ForcedOpen, "{name}");
    }
    assert_eq!(real.state(), State::Closed);
    browser.close().await;
    drop(keys);
}

/// Overload (issue 21): a dry-run breaker that sheds and has an adaptive bulkhead says all
/// three under its state, and the rejected count's tooltip splits out the throttled calls.
#[tokio::test(start_paused = true)]
async fn the_page_shows_dry_runs_shedding_and_concurrency_limits() {
    let _one = ONE_AT_A_TIME.lock().await;
    const NAME: &str = "dash_page::overload";
    let b = Breaker::new(
        NAME,
        Config::default()
            .threshold(u32::MAX)
            .throttle(2.0)
            .adaptive_concurrency(50)
            .dry_run(true),
    );
    for _ in 0..200 {
        let _ = b.call_sync(|| Err::<(), _>("503"));
    }
    let snap = b.snapshot();
    assert!(snap.dry_run && snap.throttle_rate > 0.0, "{snap:?}");
    let (base, _) = serve(Router::new().merge(breaker::dashboard::router())).await;
    let browser = Chromium::launch().await;
    browser.open(&format!("{base}/")).await;
    browser.eval("dashboard.refresh()").await;
    let tags = serde_json::to_string(NAME).unwrap();
    let shown = browser
        .wait_for(
            &format!(
                "[...document.querySelectorAll('#rows tr')].map((tr) => [tr.querySelector('td.name').textContent, tr.querySelector('td.state .tags').textContent]).find(([n]) => n === {tags})?.[1]"
            ),
            "document.body.innerText",
        )
        .await;
    let text = shown.as_str().unwrap().to_owned();
    assert!(text.contains("dry run"), "{text}");
    assert!(text.contains("shedding 90.0%"), "{text}");
    assert!(text.contains("limit 20"), "{text}");
    browser.close().await;
}

/// Issue 28 finding 12: a dry run's transitions are marked as such on the event stream and
/// in the page's list ("dry run, would go closed → open"); a real breaker's are not.
#[tokio::test(start_paused = true)]
async fn a_dry_runs_transitions_say_would_on_the_stream_and_the_page() {
    let _one = ONE_AT_A_TIME.lock().await;
    const DRY: &str = "dash_page::dry_transitions";
    const REAL: &str = "dash_page::real_transitions";
    let dry = Breaker::new(DRY, Config::default().threshold(1).dry_run(true));
    let real = Breaker::new(REAL, Config::default().threshold(1));
    let (base, _) = serve(Router::new().merge(breaker::dashboard::router())).await;
    let named = |e: &[Value], name: &str| e.iter().find(|e| e["breaker"] == name).cloned();
    let events = read_events(
        &base,
        None,
        |e| named(e, DRY).is_some() && named(e, REAL).is_some(),
        |_| {
            let _ = dry.call_sync(|| Err::<(), _>("503"));
            let _ = real.call_sync(|| Err::<(), _>("503"));
        },
    )
    .await;
    assert_eq!(named(&events, DRY).unwrap()["dry_run"], true);
    assert_eq!(named(&events, REAL).unwrap()["dry_run"], false);

    let browser = Chromium::launch().await;
    browser.open(&format!("{base}/")).await;
    let line = |name: &str| {
        let name = serde_json::to_string(name).unwrap();
        format!(
            "[...document.querySelectorAll('#transitions li')].find((li) => \
               li.querySelector('.tname').textContent === {name})?.querySelector('.move').textContent"
        )
    };
    let dry_line = browser
        .wait_for(&line(DRY), "document.body.innerText")
        .await;
    let real_line = browser
        .wait_for(&line(REAL), "document.body.innerText")
        .await;
    assert!(
        dry_line.as_str().unwrap().contains("dry run, would go"),
        "{dry_line}"
    );
    assert!(
        !real_line.as_str().unwrap().contains("would"),
        "{real_line}"
    );
    browser.close().await;
}

// ---- with a fleet installed (feature `redis`) -----------------------------------------------

/// Whether `name`'s row shows the "fleet-wide" label, and its buttons' tooltips.
#[cfg(feature = "redis")]
fn scope(name: &str) -> String {
    let name = serde_json::to_string(name).unwrap();
    format!(
        "(() => {{ for (const tr of document.querySelectorAll('#rows tr')) \
           if (tr.querySelector('td.name').textContent === {name}) {{ \
             const label = tr.querySelector('td.actions .scope'); \
             return {{ label: label.hidden ? null : label.textContent, \
               titles: [...tr.querySelectorAll('td.actions button')].map((b) => b.title) }}; }} \
           return null; }})()"
    )
}

/// Two instances in one process, each its own `Fleet` on one real `redis-server`: the
/// dashboard of the one whose fleet is installed acts fleet-wide on its members (the twin in
/// the other instance follows), says so on the row, in the tooltips and in the
/// confirmation, acts locally on a breaker that is no member, and, with Redis gone, still
/// acts on its own breaker and says it went no further. Real time: the fleet talks to a real
/// Redis.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_fleet_installed_the_buttons_act_fleet_wide_for_members_and_say_so() {
    use breaker::fleet::Fleet;

    let _one = ONE_AT_A_TIME.lock().await;
    const MEMBER: &str = "dash_fleet::payments";
    const LOCAL: &str = "dash_fleet::local_only";
    let mut server = redis_server::RedisServer::start();
    let connect = |instance: &str| {
        Fleet::builder(server.url())
            .instance(instance)
            .prefix("dash")
            .connect()
    };
    let here = connect("dash#here").await.expect("connect");
    let there = connect("dash#there").await.expect("connect");
    // The other instance's breakers first: in one process the registry's lookup by name (and
    // the page, one row per name) finds the most recent breaker of a name, this instance's.
    let twin = Breaker::new(MEMBER, slow_to_open(5));
    let twin_local = Breaker::new(LOCAL, slow_to_open(5));
    there.join(&twin);
    there.join(&twin_local);
    let member = Breaker::new(MEMBER, slow_to_open(5));
    let local = Breaker::new(LOCAL, slow_to_open(5));
    here.join(&member);
    breaker::fleet::install(here);

    let (base, _) = serve(breaker::dashboard::router_with_controls()).await;
    // The JSON says which breakers are members (a field added to the snapshot's shape).
    let (status, _, body) = http(&base, "GET", "/snapshot.json", &[]).await;
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&body).unwrap();
    let fleet_of = |name: &str| -> Vec<Value> {
        listed["breakers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["name"] == name)
            .map(|b| b["fleet"].clone())
            .collect()
    };
    // (The twins are members of the other instance's fleet, not of the installed one.)
    assert_eq!(fleet_of(MEMBER), [json!(false), json!(true)]);
    assert_eq!(fleet_of(LOCAL), [json!(false), json!(false)]);

    let browser = Chromium::launch().await;
    browser.open(&format!("{base}/")).await;
    browser.eval("dashboard.refresh()").await;
    let shown = browser
        .wait_for(
            &format!("{s} && {s}.label && {s}", s = scope(MEMBER)),
            "document.body.innerText",
        )
        .await;
    assert_eq!(shown["label"], "fleet-wide");
    for title in shown["titles"].as_array().unwrap() {
        assert!(title.as_str().unwrap().starts_with("Fleet-wide"), "{title}");
    }
    let shown = browser.eval(&scope(LOCAL)).await;
    assert_eq!(
        shown["label"],
        Value::Null,
        "no member: no fleet-wide label"
    );
    for title in shown["titles"].as_array().unwrap() {
        assert!(title.as_str().unwrap().contains("this instance"), "{title}");
    }

    // Force open on the member, in the page of this instance: the twin in the other opens.
    let asked = browser.asked(&click(MEMBER, "button.force_open")).await;
    assert!(asked.contains("fleet-wide, in every instance"), "{asked}");
    browser
        .eval("document.getElementById('confirm-ok').click()")
        .await;
    let toast = browser.toast("Force open: done").await;
    assert_eq!(toast, format!("Force open: done fleet-wide for {MEMBER}"));
    assert_eq!(member.state(), State::ForcedOpen);
    wait_until("the other instance's member forced open", || {
        twin.state() == State::ForcedOpen
    })
    .await;

    // Reset, fleet-wide too. (The toast comes once this instance's members are reset; the
    // other instance may hear of it before or after that.)
    browser.confirm(&click(MEMBER, "button.reset")).await;
    let toast = browser.toast("Reset: done").await;
    assert_eq!(toast, format!("Reset: done fleet-wide for {MEMBER}"));
    assert_eq!(member.state(), State::Closed);
    wait_until("the other instance's member reset", || {
        twin.state() == State::Closed
    })
    .await;

    // No member: this instance's breaker only, nothing kept in Redis for the fleet.
    browser.confirm(&click(LOCAL, "button.force_open")).await;
    browser.row_in(LOCAL, "forced_open").await;
    // (The reset's toast may still show: wait for this one's own words.)
    let toast = browser
        .toast(&format!("Force open: done for {LOCAL}"))
        .await;
    assert!(!toast.contains("fleet-wide"), "{toast}");
    assert_eq!(local.state(), State::ForcedOpen);
    assert_eq!(
        server.command(&["EXISTS", "{dash:dash_fleet::local_only}:manual"]),
        ":0"
    );
    assert_eq!(twin_local.state(), State::Closed);

    // Redis gone: the member's button still acts here, and the page says how far it went.
    server.kill();
    browser.confirm(&click(MEMBER, "button.disable")).await;
    let toast = browser.toast("Disable: done").await;
    assert!(
        toast.starts_with(&format!("Disable: done on this instance only for {MEMBER}")),
        "{toast}"
    );
    assert_eq!(member.state(), State::Disabled);
    browser.close().await;
}

/// Polls `cond` every 5 ms for at most 20 s of real time (the fleet's Redis round trips).
#[cfg(feature = "redis")]
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..4_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out after 20 s waiting for {what}");
}

/// The share of `name`'s "last 5 min" bar (its state band) that is empty: the canvas's
/// transparent pixels along the band's middle.
fn empty_share_of_bar(name: &str) -> String {
    let name = serde_json::to_string(name).unwrap();
    format!(
        "(() => {{ for (const tr of document.querySelectorAll('#rows tr')) {{ \
           if (tr.querySelector('td.name').textContent !== {name}) continue; \
           const cv = tr.querySelector('td.timeline canvas'); \
           const dpr = window.devicePixelRatio || 1; \
           const px = cv.getContext('2d').getImageData(0, Math.floor(4 * dpr), cv.width, 1).data; \
           let empty = 0; \
           for (let i = 0; i < cv.width; i++) if (px[4 * i + 3] === 0) empty++; \
           return empty / cv.width; }} \
           return null; }})()"
    )
}

/// Issue 40, finding 13: the "last 5 min" bar drew the time before a breaker existed as
/// closed (the state before its first transition, stretched back to the bar's start). A
/// breaker made a minute ago, open since, shows four minutes empty, then a minute closed.
#[tokio::test(start_paused = true)]
async fn the_history_bar_shows_the_time_before_a_breaker_existed_as_empty() {
    let _one = ONE_AT_A_TIME.lock().await;
    const NAME: &str = "dash_page::young";
    let (base, _) = serve(breaker::dashboard::router()).await;
    let young = Breaker::new(NAME, slow_to_open(1));
    tokio::time::advance(Duration::from_secs(60)).await;
    fail(&young).await;
    assert_eq!(young.state(), State::Open);

    let browser = Chromium::launch().await;
    browser.open(&format!("{base}/")).await;
    // The page learns of the opening from the stream's backlog, then draws with it.
    browser
        .wait_for(&format!("{}.length === 1", listed(NAME)), &listed(NAME))
        .await;
    browser.row_after_refresh(NAME, "open", 1).await;
    let empty = browser.eval(&empty_share_of_bar(NAME)).await;
    let empty = empty.as_f64().unwrap_or(-1.0);
    assert!(
        (0.75..=0.85).contains(&empty),
        "four minutes of five are before the breaker existed: {empty} of the bar is empty"
    );
    browser.close().await;
}

/// Dashboard × Redis down, through the control routes: with the installed fleet's Redis
/// killed, each button on a member (force open, disable, reset) still acts on this
/// instance's breaker, and its answer says how far it went (`scope: "instance"` and the
/// fleet's error); Redis back, the same button acts fleet-wide again and the other
/// instance's member follows.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_fleets_redis_down_the_buttons_act_here_and_say_so() {
    use breaker::fleet::Fleet;

    let _one = ONE_AT_A_TIME.lock().await;
    const MEMBER: &str = "dash_down::payments";
    let mut server = redis_server::RedisServer::start();
    let connect = |instance: &str| {
        Fleet::builder(server.url())
            .instance(instance)
            .prefix("dash_down")
            .connect()
    };
    let here = connect("dash_down#here").await.expect("connect");
    let there = connect("dash_down#there").await.expect("connect");
    // The other instance's first: the registry finds the most recent breaker of a name.
    let twin = Breaker::new(MEMBER, slow_to_open(5));
    there.join(&twin);
    let member = Breaker::new(MEMBER, slow_to_open(5));
    here.join(&member);
    breaker::fleet::install(here);
    let (base, _) = serve(breaker::dashboard::router_with_controls()).await;
    let press = |action: &'static str| {
        let base = base.clone();
        async move {
            let path = format!("/breakers/{MEMBER}/{action}");
            let (status, _, body) = http(&base, "POST", &path, &[]).await;
            assert_eq!(status, 200, "{action}: {body}");
            serde_json::from_str::<Value>(&body).unwrap()
        }
    };

    server.kill();
    for (action, state, shown) in [
        ("force_open", State::ForcedOpen, "forced_open"),
        ("disable", State::Disabled, "disabled"),
        ("reset", State::Closed, "closed"),
    ] {
        let answer = press(action).await;
        assert_eq!(
            (&answer["fleet"], &answer["scope"], &answer["state"]),
            (&json!(true), &json!("instance"), &json!(shown)),
            "{action}: {answer}"
        );
        let error = answer["fleet_error"].as_str().unwrap_or_default();
        assert!(!error.is_empty(), "{action}: no fleet_error in {answer}");
        assert_eq!(member.state(), state, "{action} acted here");
        assert_eq!(twin.state(), State::Closed, "{action} went no further");
    }

    server.restart();
    // Pressed until the fleet answers again (each press meanwhile acts here, as above).
    let mut answer = Value::Null;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while answer["scope"] != "fleet" {
        assert!(
            std::time::Instant::now() < deadline,
            "never fleet-wide again: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        answer = press("force_open").await;
    }
    assert_eq!(answer.get("fleet_error"), None, "{answer}");
    assert_eq!(member.state(), State::ForcedOpen);
    wait_until("the other instance's member forced open", || {
        twin.state() == State::ForcedOpen
    })
    .await;
    let answer = press("reset").await;
    assert_eq!(answer["scope"], "fleet", "{answer}");
    wait_until("both reset", || {
        member.state() == State::Closed && twin.state() == State::Closed
    })
    .await;
}
