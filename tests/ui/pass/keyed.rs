//! `key = …`: fields of `&self` (an integer, a `String`), temporaries, pairs, addresses, a
//! user's own key type, generic keys, with policy keys, a fallback, `classify`, plain `fn`s.
//! The key is borrowed only for the lookup, so the body may move what it came from.
use breaker::{circuit_breaker, BreakerError, BreakerKey, CallError, Verdict};
use std::{fmt, net::IpAddr};

struct TenantDb {
    tenant_id: u64,
    host: String,
}

impl TenantDb {
    #[circuit_breaker(key = self.tenant_id, failure_rate = 50, window = 20)]
    async fn query(&self, sql: &str) -> Result<usize, BreakerError> {
        Ok(sql.len())
    }

    #[circuit_breaker(key = self.host, max_keys = 100, idle = "1m")]
    async fn ping(&self) -> Result<(), BreakerError> {
        Ok(())
    }

    #[circuit_breaker(key = self.host)]
    async fn into_host(self) -> Result<String, BreakerError> {
        Ok(self.host) // moves what the key borrowed
    }

    #[circuit_breaker(key = self.host, fallback = offline)]
    async fn bump(&mut self, by: u64) -> Result<u64, BreakerError> {
        self.tenant_id += by;
        Ok(self.tenant_id)
    }

    async fn offline(&mut self, _by: u64, _e: CallError<BreakerError>) -> Result<u64, BreakerError> {
        Ok(0)
    }

    #[circuit_breaker(key = (self.host.as_str(), self.tenant_id), classify = |r| if r.is_ok() { Verdict::Success } else { Verdict::Failure })]
    fn sync_pair(&self) -> Result<u64, BreakerError> {
        Ok(self.tenant_id)
    }
}

#[circuit_breaker(key = url.split('/').nth(2).unwrap_or(""), threshold = 5, cool_off = "30s")]
async fn deliver_webhook(url: &str, body: &[u8]) -> Result<usize, BreakerError> {
    Ok(url.len() + body.len())
}

#[circuit_breaker(key = (host, port))]
fn connect(host: &str, port: u16) -> Result<(), std::io::Error> {
    let _ = (host, port);
    Ok(())
}

#[circuit_breaker(key = addr, name = "pass::by_ip")]
async fn by_ip(addr: IpAddr) -> Result<IpAddr, BreakerError> {
    Ok(addr)
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Region(u8);

impl BreakerKey for Region {
    fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "region-{}", self.0)
    }
}

#[circuit_breaker(key = region)]
async fn by_region(region: Region) -> Result<u8, BreakerError> {
    let Region(n) = region; // moved by the body
    Ok(n)
}

#[circuit_breaker(key = region, fallback = |_r, _e| Ok(0))]
fn by_region_ref(region: &Region) -> Result<u8, BreakerError> {
    Ok(region.0)
}

#[circuit_breaker(key = key)]
fn generic<K: BreakerKey + Clone>(key: K) -> Result<(), BreakerError> {
    drop(key);
    Ok(())
}

fn is_send<T: Send>(t: T) -> T {
    t
}

fn main() {
    let mut db = TenantDb { tenant_id: 1, host: "db".to_owned() };
    drop(is_send(db.query("select 1")));
    drop(is_send(db.ping()));
    drop(is_send(db.bump(1)));
    let _ = db.sync_pair();
    drop(is_send(db.into_host()));
    drop(is_send(deliver_webhook("https://example.com/hook", b"{}")));
    let _ = connect("example.com", 443);
    drop(is_send(by_ip(IpAddr::from([127, 0, 0, 1]))));
    drop(is_send(by_region(Region(3))));
    let _ = by_region_ref(&Region(4));
    let _ = generic(1u32);
    let _ = generic(Region(5));
}
