//! The probe lease: one instance of the fleet probes at a time. Asked for only by an
//! instance with a call waiting, held with an expiry and renewed while its probe runs, so a
//! probe slower than the lease is still the only one; released when no probe came of it.

use std::time::Duration;

use super::protocol::{Keys, CLOSED};

/// How long a lease lasts unless renewed.
pub(crate) const LEASE: Duration = Duration::from_millis(3_000);
/// How often the holder renews it while its probe runs (a third of the lease: two renewals
/// may be lost, or take a second each, before another instance could take it).
pub(crate) const RENEW: Duration = Duration::from_millis(1_000);

/// Try the lease; tell why not: `{1, pttl}` open again, `{2, 0}` won, `{3, 0}` closed by the
/// probe, `{4, pttl}` held by another instance. An open key with at most `ARGV[4]` ms left
/// is an opening the asking instance capped (its cap passed): not a reason to wait.
const TRY: &str = r#"
local open = redis.call('PTTL', KEYS[1])
if open > tonumber(ARGV[4]) then return {1, open} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2, 0} end
if redis.call('GET', KEYS[2]) == ARGV[3] then return {3, 0} end
return {4, redis.call('PTTL', KEYS[2])}
"#;

/// Renew the lease if this instance holds it (`ARGV[2]` ms), or release it (`0`): 1 if held.
const RENEW_OR_RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
"#;

/// What asking for the lease said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The fleet is open again for this many ms.
    Open(u64),
    /// This instance holds the lease: grant a member the probe.
    Won,
    /// The fleet's probe closed it.
    Closed,
    /// Another instance holds it for this many ms more.
    Held(u64),
}

pub(crate) fn try_cmd(keys: &Keys, instance: &str, ignore_ms: u64) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(TRY)
        .arg(2)
        .arg(&keys.open)
        .arg(&keys.probe)
        .arg(instance)
        .arg(LEASE.as_millis() as u64)
        .arg(CLOSED)
        .arg(ignore_ms);
    cmd
}

pub(crate) fn answer((what, ms): (i64, i64)) -> Answer {
    let ms = ms.max(0) as u64;
    match what {
        1 if ms > 0 => Answer::Open(ms),
        2 => Answer::Won,
        3 => Answer::Closed,
        _ => Answer::Held(ms),
    }
}

/// Renews (`release == false`) or releases the lease this instance holds.
pub(crate) fn renew_cmd(keys: &Keys, instance: &str, release: bool) -> redis::Cmd {
    let ms = if release { 0 } else { LEASE.as_millis() as u64 };
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(RENEW_OR_RELEASE)
        .arg(1)
        .arg(&keys.probe)
        .arg(instance)
        .arg(ms);
    cmd
}
