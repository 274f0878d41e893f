//! Fleets against a real `redis-server` that each test starts on a free loopback port
//! (tests/support/redis.rs). Real time, a few seconds each, conditions awaited by polling
//! with a bounded deadline.
#![cfg(feature = "redis")]

#[path = "support/redis.rs"]
#[allow(dead_code)] // the cluster's helpers are tests/fleet_cluster.rs's
mod redis_server;
#[path = "support/stall.rs"]
mod stall;

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use breaker::{fleet::Fleet, Breaker, Cause, Config, State};
use redis_server::RedisServer;
use stall::StallMeter;

/// How long a real-time condition may take before the test fails. Passing runs take
/// milliseconds; the bound is generous because a CI machine may be busy (at 5 s, one run in
/// about fifteen failed on a loaded 2-core machine: a lease or a reconnect backoff lapsed
/// while the test's tasks waited for a core).
const WITHIN: Duration = Duration::from_secs(20);

async fn fleet(server: &RedisServer, instance: &str, quorum: u32) -> Fleet {
    Fleet::builder(server.url())
        .instance(instance)
        .prefix("t")
        .quorum(quorum)
        .connect()
        .await
        .expect("connect to the test's redis-server")
}

/// Causes of the transitions a breaker went through, in order.
type Log = Arc<Mutex<Vec<(State, Cause)>>>;

fn member(name: &str, cool_off_ms: u64) -> (Breaker, Log) {
    let log: Log = Arc::default();
    let seen = log.clone();
    let config = Config::default()
        .threshold(1)
        .cool_off(Duration::from_millis(cool_off_ms))
        .on_state_change(move |t| seen.lock().unwrap().push((t.to, t.cause)));
    (Breaker::new(name, config), log)
}

/// `n` instances, each its own `Fleet` with one member named `name`.
async fn instances(
    server: &RedisServer,
    name: &str,
    n: usize,
    quorum: u32,
    cool_off_ms: u64,
) -> Vec<(Fleet, Breaker, Log)> {
    let mut all = Vec::new();
    for i in 0..n {
        let f = fleet(server, &format!("{name}#{i}"), quorum).await;
        let (b, log) = member(name, cool_off_ms);
        f.join(&b);
        all.push((f, b, log));
    }
    // Joining is asynchronous: a member whose join the task has not seen yet would miss an
    // opening. A command's answer comes after every command sent before it, so each task
    // has taken its join once `timer_entries` answers (a loaded machine once took longer
    // than `settle` for it); then wait until every task has read the (absent) open key.
    for (f, _, _) in &all {
        f.timer_entries().await;
    }
    settle().await;
    all
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

fn trip(b: &Breaker) {
    let r = b.call_sync(|| Err::<(), _>("down"));
    assert!(r.is_err());
}

async fn wait_for(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn all_in(members: &[(Fleet, Breaker, Log)], state: State) -> bool {
    members.iter().all(|(_, b, _)| b.state() == state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opening_spreads_to_every_instance_for_the_rest_of_its_cool_off() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::spread", 5, 1, 2_000).await;
    let started = Instant::now();
    trip(&members[0].1);
    wait_for("every instance open", WITHIN, || {
        all_in(&members, State::Open)
    })
    .await;
    let took = started.elapsed();
    println!("the opening reached 4 instances in {took:?}");
    assert!(
        took < Duration::from_millis(250),
        "took {took:?} on loopback"
    );
    for (_, b, log) in &members[1..] {
        assert_eq!(
            log.lock().unwrap().last(),
            Some(&(State::Open, Cause::Fleet))
        );
        let left = b.retry_in().unwrap();
        assert!(
            left > Duration::from_millis(1_500) && left <= Duration::from_secs(2),
            "{left:?}"
        );
    }
    let own = *members[0].2.lock().unwrap().last().unwrap();
    assert!(matches!(
        own,
        (State::Open, Cause::ConsecutiveFailures { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_quorum_of_two_one_instance_does_not_trip_the_rest() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::quorum", 3, 2, 1_500).await;
    trip(&members[0].1);
    wait_for("i0's trip key", WITHIN, || {
        server.command(&["EXISTS", "{t:fleet::quorum}:trip:fleet::quorum#0"]) == ":1"
    })
    .await;
    let watch_until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < watch_until {
        assert_eq!(members[1].1.state(), State::Closed);
        assert_eq!(members[2].1.state(), State::Closed);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.command(&["EXISTS", "{t:fleet::quorum}:open"]), ":0");
    // A second instance within the cool-off: the quorum is met, everyone opens.
    trip(&members[1].1);
    wait_for("i2 open by the fleet", WITHIN, || {
        members[2].1.state() == State::Open
    })
    .await;
    assert_eq!(
        members[2].2.lock().unwrap().last(),
        Some(&(State::Open, Cause::Fleet))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_counts_only_openings_within_one_cool_off() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::stale", 3, 2, 300).await;
    trip(&members[0].1);
    let key = "{t:fleet::stale}:trip:fleet::stale#0";
    wait_for("i0's trip key", WITHIN, || {
        server.command(&["EXISTS", key]) == ":1"
    })
    .await;
    // Its cool-off passes: the signal expires with it.
    wait_for("i0's trip key to expire", WITHIN, || {
        server.command(&["EXISTS", key]) == ":0"
    })
    .await;
    trip(&members[1].1);
    let key = "{t:fleet::stale}:trip:fleet::stale#1";
    wait_for("i1's trip key", WITHIN, || {
        server.command(&["EXISTS", key]) == ":1"
    })
    .await;
    let watch_until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < watch_until {
        assert_eq!(
            members[2].1.state(),
            State::Closed,
            "a stale opening counted"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.command(&["EXISTS", "{t:fleet::stale}:open"]), ":0");
}

/// One round: every instance calls its member in a loop until its member is closed again;
/// the dependency counts the calls that reach it before the first one finished.
async fn recover(members: &[(Fleet, Breaker, Log)], probe_ms: u64) -> (u32, usize) {
    let hits = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let prober = Arc::new(AtomicUsize::new(usize::MAX));
    let mut callers = Vec::new();
    for (i, (_, b, _)) in members.iter().enumerate() {
        let (b, hits, done, prober) = (b.clone(), hits.clone(), done.clone(), prober.clone());
        callers.push(tokio::spawn(async move {
            let deadline = Instant::now() + WITHIN;
            while Instant::now() < deadline {
                // As a dashboard or a health check would: reading the state past the
                // cool-off must not let a second instance probe.
                let _ = b.state();
                let _ = breaker::registry().snapshot();
                let call = b.call(async {
                    if !done.load(SeqCst) {
                        hits.fetch_add(1, SeqCst);
                        prober.store(i, SeqCst);
                        tokio::time::sleep(Duration::from_millis(probe_ms)).await;
                        done.store(true, SeqCst);
                    }
                    Ok::<_, ()>(())
                });
                let _ = call.await;
                if done.load(SeqCst) && b.state() == State::Closed {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            false
        }));
    }
    for c in callers {
        assert!(c.await.unwrap(), "an instance stayed open");
    }
    (hits.load(SeqCst), prober.load(SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_instance_probes_after_the_cool_off() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::probe", 5, 1, 250).await;
    let mut probers = Vec::new();
    for round in 0..10 {
        trip(&members[round % 5].1);
        wait_for("every instance open", WITHIN, || {
            all_in(&members, State::Open)
        })
        .await;
        let (hits, prober) = recover(&members, 150).await;
        assert_eq!(
            hits, 1,
            "round {round}: {hits} probes reached the dependency"
        );
        probers.push(prober);
        assert!(all_in(&members, State::Closed));
    }
    println!("probing instance per round: {probers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_probe_reopens_every_instance_and_a_good_one_closes_them_all() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::reopen", 3, 1, 300).await;
    trip(&members[0].1);
    wait_for("every instance open", WITHIN, || {
        all_in(&members, State::Open)
    })
    .await;
    // Past the fleet's open period everyone waits for the probe: retry_in runs out.
    wait_for("the open period to end", WITHIN, || {
        members
            .iter()
            .all(|(_, b, _)| b.retry_in().unwrap_or_default() < Duration::from_millis(50))
    })
    .await;
    let hits = Arc::new(AtomicU32::new(0));
    let deadline = Instant::now() + WITHIN;
    while hits.load(SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no instance probed");
        for (_, b, _) in &members {
            let hits = hits.clone();
            let _ = b.call_sync(move || {
                hits.fetch_add(1, SeqCst);
                Err::<(), _>("still down")
            });
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    assert_eq!(hits.load(SeqCst), 1);
    // The failure reopened the whole fleet: a fresh open period everywhere.
    wait_for("every instance reopened", WITHIN, || {
        members.iter().all(|(_, b, _)| {
            b.state() == State::Open
                && b.retry_in().unwrap_or_default() > Duration::from_millis(100)
        })
    })
    .await;
    let (hits, _) = recover(&members, 50).await;
    assert_eq!(hits, 1, "one probe closes the fleet");
    for (_, _, log) in &members {
        let last = *log.lock().unwrap().last().unwrap();
        assert!(matches!(
            last,
            (State::Closed, Cause::Fleet | Cause::ProbesSucceeded { .. })
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_message_is_made_up_by_the_resync() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::lost", 3, 1, 1_000).await;
    // Another instance opened the fleet, and its message never arrived: messages are lost
    // when a subscription breaks, and the resync after the reconnection reads every name.
    let set = server.command(&["SET", "{t:fleet::lost}:open", "gone", "PX", "5000"]);
    assert_eq!(set, "+OK");
    assert!(server
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .starts_with(':'));
    wait_for("every instance open", WITHIN, || {
        all_in(&members, State::Open)
    })
    .await;
    for (_, b, log) in &members {
        assert_eq!(
            log.lock().unwrap().last(),
            Some(&(State::Open, Cause::Fleet))
        );
        assert!(b.retry_in().unwrap() > Duration::from_millis(1_000));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_learns_that_the_fleet_is_open() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::late", 2, 1, 3_000).await;
    trip(&members[0].1);
    wait_for("i1 open", WITHIN, || members[1].1.state() == State::Open).await;
    // A new instance starts while the fleet is open.
    let late_fleet = fleet(&server, "late", 1).await;
    let (late, log) = member("fleet::late", 3_000);
    late_fleet.join(&late);
    wait_for("the late joiner open", WITHIN, || {
        late.state() == State::Open
    })
    .await;
    assert_eq!(
        log.lock().unwrap().last(),
        Some(&(State::Open, Cause::Fleet))
    );
    let left = late.retry_in().unwrap();
    assert!(
        left > Duration::from_millis(1_500) && left < Duration::from_secs(3),
        "{left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_waits_for_the_probe_of_another_instance() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::late_probe", 2, 1, 200).await;
    // Connected now, so that joining later takes no round trip.
    let late_fleet = fleet(&server, "fleet::late_probe#late", 1).await;
    trip(&members[0].1);
    wait_for("i1 open", WITHIN, || members[1].1.state() == State::Open).await;
    // i0 probes, slowly: its lease is renewed for as long as the probe runs, so the late
    // joiner finds it however long a busy machine takes to get there. (A granted member that
    // makes no call gives the lease back after a few seconds: a test that relied on joining
    // within them failed on a loaded CI machine.) Only an instance with a call waiting asks
    // for the lease, so the first calls past the open period are refused until i0 wins it.
    let release = Arc::new(tokio::sync::Notify::new());
    let probe = {
        let (prober, release) = (members[0].1.clone(), release.clone());
        tokio::spawn(async move {
            loop {
                let r = prober
                    .call(async {
                        release.notified().await;
                        Ok::<_, ()>(())
                    })
                    .await;
                match r {
                    Ok(()) => return,
                    Err(e) if e.is_open() => {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err(e) => panic!("the probe failed: {e:?}"),
                }
            }
        })
    };
    wait_for("i0's probe", WITHIN, || {
        members[0].1.state() == State::HalfOpen
    })
    .await;
    assert_eq!(
        server.command(&["EXISTS", "{t:fleet::late_probe}:probe"]),
        ":1",
        "i0 probes with the lease"
    );
    let (late, _) = member("fleet::late_probe", 200);
    late_fleet.join(&late);
    wait_for("the late joiner held open", WITHIN, || {
        late.state() == State::Open
    })
    .await;
    let refused = late.call_sync(|| -> Result<(), ()> { panic!("not the fleet's probe") });
    assert!(refused.unwrap_err().is_open());
    // The lease holder's probe closes everyone, the late joiner too.
    release.notify_one();
    probe.await.expect("the probe's task");
    wait_for("every instance closed, the late joiner too", WITHIN, || {
        late.state() == State::Closed && all_in(&members, State::Closed)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_incident_leaves_local_breakers_then_resyncs() {
    let warnings = warn_log::install();
    let mut server = RedisServer::start();
    let members = instances(&server, "fleet::outage", 3, 1, 400).await;
    trip(&members[0].1);
    wait_for("every instance open", WITHIN, || {
        all_in(&members, State::Open)
    })
    .await;
    server.kill();
    // Every breaker behaves as a local one: each probes and closes by itself, and no call
    // ever waits on Redis.
    let deadline = Instant::now() + WITHIN;
    let mut calls = 0;
    while !all_in(&members, State::Closed) {
        assert!(
            Instant::now() < deadline,
            "breakers stayed open without Redis"
        );
        for (_, b, _) in &members {
            let call = b.call(async { Ok::<_, ()>(()) });
            let r = tokio::time::timeout(Duration::from_secs(1), call)
                .await
                .expect("a call waited on the dead Redis");
            if let Err(e) = r {
                assert!(e.is_open(), "only the breaker's own refusal: {e:?}");
            }
            calls += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("{calls} calls while Redis was down, none failed because of it");
    server.restart();
    // ("Redis is back", not "back": the outage's WARN ends with "until it is back".)
    wait_for("every instance reconnected", WITHIN, || {
        (0..3).all(|i| {
            let instance = format!("fleet::outage#{i}");
            warn_log::count(warnings, &instance, "Redis is back") >= 1
        })
    })
    .await;
    assert_eq!(
        warn_log::count(warnings, "fleet::outage#", "unreachable"),
        3,
        "one WARN per instance for the outage, however many reconnects failed"
    );
    // The fleet works again: an opening spreads.
    for (_, b, _) in &members {
        close_by_calls(b).await;
    }
    trip(&members[1].1);
    wait_for("every instance open after the reconnection", WITHIN, || {
        all_in(&members, State::Open)
    })
    .await;
    for (_, _, log) in [&members[0], &members[2]] {
        assert_eq!(
            log.lock().unwrap().last(),
            Some(&(State::Open, Cause::Fleet))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_blocks_no_call() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::pause", 3, 1, 300).await;
    assert_eq!(server.command(&["CLIENT", "PAUSE", "1500", "ALL"]), "+OK");
    // The trip's Redis round trip hangs on the task; calls go on.
    trip(&members[0].1);
    let until = Instant::now() + Duration::from_millis(1_000);
    let (mut started, mut finished) = (0u32, 0u32);
    while Instant::now() < until {
        for (_, b, _) in &members {
            started += 1;
            let call = b.call(async { Ok::<_, ()>(()) });
            if tokio::time::timeout(Duration::from_millis(200), call)
                .await
                .is_ok()
            {
                finished += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    println!("{finished} of {started} calls completed while Redis was paused");
    assert_eq!(finished, started);
    assert!(started > 100);
    // After the pause the fleet works again (reconnected if the pause broke the link).
    close_by_calls(&members[0].1).await;
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        trip(&members[0].1);
        let spread = Instant::now() + Duration::from_millis(500);
        while Instant::now() < spread && !all_in(&members, State::Open) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if all_in(&members, State::Open) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the fleet did not come back after the pause"
        );
        for (_, b, _) in &members {
            close_by_calls(b).await;
        }
    }
}

/// Calls a working dependency through `b` until it is closed (probing when allowed).
async fn close_by_calls(b: &Breaker) {
    let deadline = Instant::now() + WITHIN;
    while b.state() != State::Closed {
        assert!(Instant::now() < deadline, "{} stayed open", b.name());
        let _ = b.call(async { Ok::<_, ()>(()) }).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_true_joins_the_installed_fleet() {
    let warnings = warn_log::install();
    let server = RedisServer::start();
    // What `#[circuit_breaker(fleet = true)]` calls; nothing installed yet.
    let (lonely, _) = member("fleet::installed", 1_000);
    breaker::fleet::join_installed(&lonely);
    let warned = warn_log::count(warnings, "fleet::installed", "no fleet installed");
    assert_eq!(warned, 1);
    let other = fleet(&server, "fleet::installed#other", 1).await;
    let (elsewhere, _) = member("fleet::installed", 1_000);
    other.join(&elsewhere);
    breaker::fleet::install(fleet(&server, "fleet::installed#mine", 1).await);
    let (joined, log) = member("fleet::installed", 1_000);
    breaker::fleet::join_installed(&joined);
    settle().await;
    trip(&elsewhere);
    wait_for("the joined breaker open", WITHIN, || {
        joined.state() == State::Open
    })
    .await;
    assert_eq!(
        log.lock().unwrap().last(),
        Some(&(State::Open, Cause::Fleet))
    );
    assert_eq!(
        lonely.state(),
        State::Closed,
        "joined before any fleet: local"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_keeps_no_breaker_alive() {
    let server = RedisServer::start();
    let f = fleet(&server, "fleet::dropped#0", 1).await;
    let (b, _) = member("fleet::dropped", 1_000);
    f.join(&b);
    settle().await;
    assert!(breaker::registry().get("fleet::dropped").is_some());
    drop(b);
    // A fleet task walking the registry may hold it for an instant; then it is gone. Waits
    // on that task by yielding, a bounded number of times, never on time.
    let mut gone = false;
    for _ in 0..100_000 {
        if breaker::registry().get("fleet::dropped").is_none() {
            gone = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(gone, "the fleet kept a dropped breaker alive");
}

#[test]
fn malformed_and_foreign_messages_change_nothing() {
    use proptest::{prelude::*, test_runner::TestRunner};

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let (target, sentinel) = rt.block_on(async {
        let f = fleet(&server, "listener", 1).await;
        let target = member("fleet::target", 1_000);
        let sentinel = member("fleet::sentinel", 1_000);
        f.join(&target.0);
        f.join(&sentinel.0);
        settle().await;
        std::mem::forget(f); // the members keep the task; the fleet handle may go
        (target, sentinel)
    });
    let near_misses = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..120),
        ".{0,80}".prop_map(String::into_bytes),
        "(open|close|shut|) .{0,40}".prop_map(|s| format!("breaker-fleet/1 {s}").into_bytes()),
        "(-1|0|x|99999999999999|1e3|) (fleet::target|)"
            .prop_map(|s| format!("breaker-fleet/1 open other {s}").into_bytes()),
        Just(b"breaker-fleet/1 open listener 5000 fleet::target".to_vec()), // our own echo
        Just(b"breaker-fleet/1 close other 0 fleet::target".to_vec()),      // close when closed
        Just(b"breaker-fleet/1 open {bad} 5000 fleet::target".to_vec()),
        Just(b"breaker-fleet/2 open other 5000 fleet::target".to_vec()),
    ];
    let mut runner = TestRunner::new(proptest::test_runner::Config {
        cases: 200,
        failure_persistence: None,
        ..Default::default()
    });
    let published = AtomicU32::new(0);
    runner
        .run(&near_misses, |payload| {
            publish(&server, &payload);
            published.fetch_add(1, SeqCst);
            Ok(())
        })
        .unwrap();
    // A valid opening after them all: once the sentinel opens, the task has read them.
    let set = server.command(&["SET", "{t:fleet::sentinel}:open", "x", "PX", "5000"]);
    assert_eq!(set, "+OK");
    publish(&server, b"breaker-fleet/1 open other 5000 fleet::sentinel");
    rt.block_on(wait_for("the sentinel open", WITHIN, || {
        sentinel.0.state() == State::Open
    }));
    assert_eq!(target.0.state(), State::Closed);
    assert!(
        target.1.lock().unwrap().is_empty(),
        "{:?}",
        target.1.lock().unwrap()
    );
    println!("{} random payloads changed nothing", published.load(SeqCst));
}

/// PUBLISH on the test fleet's channel, with any bytes.
fn publish(server: &RedisServer, payload: &[u8]) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut req = b"*3\r\n$7\r\nPUBLISH\r\n$7\r\nt:fleet\r\n".to_vec();
    req.extend_from_slice(format!("${}\r\n", payload.len()).as_bytes());
    req.extend_from_slice(payload);
    req.extend_from_slice(b"\r\n");
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 16];
    let n = s.read(&mut reply).unwrap();
    assert!(
        reply[..n].starts_with(b":"),
        "PUBLISH answered {:?}",
        &reply[..n]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_errors_are_reported_without_the_password() {
    let e = Fleet::connect("http://nope").await.unwrap_err();
    assert!(matches!(e, breaker::fleet::FleetError::Url(_)), "{e}");
    let e = Fleet::builder("redis://127.0.0.1:1/")
        .quorum(0)
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(e, breaker::fleet::FleetError::Setting(_)), "{e}");
    let e = Fleet::builder("redis://127.0.0.1:1/")
        .instance("has space")
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(e, breaker::fleet::FleetError::Setting(_)), "{e}");
    // Redis unreachable, or refusing the password: not an error (a service starts; its
    // breakers are local until Redis answers), and the WARN does not show the password.
    let warnings = warn_log::install();
    Fleet::builder("redis://:hunter2@127.0.0.1:1/")
        .instance("setup#0")
        .connect()
        .await
        .expect("a fleet starts without Redis");
    // `rediss://`: TLS with feature `redis-tls`, an invalid URL without it.
    let e = Fleet::connect("rediss://127.0.0.1:1/").await;
    if cfg!(feature = "redis-tls") {
        assert!(e.is_ok());
    } else {
        assert!(
            matches!(e, Err(breaker::fleet::FleetError::Url(_))),
            "{e:?}"
        );
    }
    // A password in the URL is used: a server that requires one accepts it.
    let server = RedisServer::start();
    assert_eq!(
        server.command(&["CONFIG", "SET", "requirepass", "s3cret"]),
        "+OK"
    );
    let url = format!("redis://:s3cret@127.0.0.1:{}/", server.port);
    let f = Fleet::builder(url)
        .instance("setup#1")
        .connect()
        .await
        .expect("connect with the password");
    let url = format!("redis://:wrong@127.0.0.1:{}/", server.port);
    Fleet::builder(url)
        .instance("setup#2")
        .connect()
        .await
        .expect("a wrong password is an outage, not an error");
    wait_for("the WARNs of both outages", WITHIN, || {
        warn_log::count(warnings, "setup#", "fleet: Redis unreachable") >= 2
    })
    .await;
    let lines = warnings.lock().unwrap().clone();
    for (i, m) in lines.iter().filter(|(i, _)| i.starts_with("setup#")) {
        assert!(!m.contains("hunter2") && !m.contains("wrong"), "{i}: {m}");
        assert!(i != "setup#1", "a good password warned: {m}");
    }
    drop(f);
}

/// The fleet's log lines, counted by instance and words, through a process-wide subscriber.
mod warn_log {
    use std::sync::{Mutex, OnceLock};

    use tracing::{
        field::{Field, Visit},
        span, Event, Metadata, Subscriber,
    };

    type Lines = Mutex<Vec<(String, String)>>;

    static LINES: OnceLock<&'static Lines> = OnceLock::new();

    /// (instance or breaker, message) of every event with such a field.
    pub fn install() -> &'static Lines {
        LINES.get_or_init(|| {
            let lines: &'static Lines = Box::leak(Box::default());
            let _ = tracing::subscriber::set_global_default(Collect(lines));
            lines
        })
    }

    pub fn count(lines: &Lines, instance_prefix: &str, words: &str) -> usize {
        lines
            .lock()
            .unwrap()
            .iter()
            .filter(|(i, m)| i.starts_with(instance_prefix) && m.contains(words))
            .count()
    }

    struct Collect(&'static Lines);

    #[derive(Default)]
    struct Fields {
        instance: Option<String>,
        message: String,
    }

    impl Visit for Fields {
        fn record_str(&mut self, field: &Field, value: &str) {
            match field.name() {
                "instance" | "breaker" => self.instance = Some(value.to_owned()),
                "message" => self.message = value.to_owned(),
                _ => {}
            }
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            match field.name() {
                "instance" | "breaker" => self.instance = Some(format!("{value:?}")),
                "message" => self.message = format!("{value:?}"),
                _ => {}
            }
        }
    }

    impl Subscriber for Collect {
        fn enabled(&self, m: &Metadata<'_>) -> bool {
            m.target() == "breaker" && *m.level() <= tracing::Level::INFO
        }
        fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
            span::Id::from_u64(1)
        }
        fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
        fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut f = Fields::default();
            event.record(&mut f);
            if let Some(instance) = f.instance {
                self.0.lock().unwrap().push((instance, f.message));
            }
        }
        fn enter(&self, _: &span::Id) {}
        fn exit(&self, _: &span::Id) {}
    }
}

// ---- Part three: adversity and scale (issue 19) ----

/// A fleet connected as Redis user `user` (password `pw`), set up with `acl` first.
async fn fleet_as(server: &RedisServer, user: &str, acl: &[&str], instance: &str) -> Fleet {
    let mut args = vec!["ACL", "SETUSER", user, "reset", "on", ">pw"];
    args.extend_from_slice(acl);
    assert_eq!(server.command(&args), "+OK");
    Fleet::builder(format!("redis://{user}:pw@127.0.0.1:{}/", server.port))
        .instance(instance)
        .prefix("t")
        .connect()
        .await
        .expect("connect succeeds whatever the user may do")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_scripting_gets_local_breakers_after_their_cool_off() {
    let warnings = warn_log::install();
    let server = RedisServer::start();
    let acl = ["~*", "&*", "+@all", "-@scripting"];
    let mut members = Vec::new();
    for i in 0..2 {
        let f = fleet_as(&server, "noscript", &acl, &format!("fleet::noperm#{i}")).await;
        let (b, log) = member("fleet::noperm", 200);
        f.join(&b);
        members.push((f, b, log));
    }
    settle().await;
    trip(&members[0].1);
    wait_for("every instance open", WITHIN, || {
        all_in(&members, State::Open)
    })
    .await;
    // The lease script is refused (NOPERM): each member is a local breaker again and closes
    // by its own probe once its cool-off is over, with a healthy dependency.
    let opened = Instant::now();
    for (_, b, _) in &members {
        close_by_calls(b).await;
    }
    let took = opened.elapsed();
    assert!(took < Duration::from_secs(3), "closed after {took:?}");
    wait_for("a WARN naming NOPERM", WITHIN, || {
        warn_log::count(warnings, "fleet::noperm#", "NOPERM") >= 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_is_all_a_fleet_needs() {
    let warnings = warn_log::install();
    let server = RedisServer::start();
    let mut members = Vec::new();
    for i in 0..3 {
        let f = fleet_as(
            &server,
            "fleet",
            &redis_server::fleet_acl(false),
            &format!("fleet::acl#{i}"),
        )
        .await;
        let (b, log) = member("fleet::acl", 300);
        f.join(&b);
        members.push((f, b, log));
    }
    settle().await;
    for round in 0..2 {
        trip(&members[round].1);
        wait_for("every instance open", WITHIN, || {
            all_in(&members, State::Open)
        })
        .await;
        let (hits, _) = recover(&members, 50).await;
        assert_eq!(hits, 1, "round {round}: one probe for the fleet");
    }
    members[0]
        .0
        .force_open("fleet::acl")
        .await
        .expect("force_open");
    wait_for("every instance forced open", WITHIN, || {
        all_in(&members, State::ForcedOpen)
    })
    .await;
    members[1].0.reset("fleet::acl").await.expect("reset");
    wait_for("every instance reset", WITHIN, || {
        all_in(&members, State::Closed)
    })
    .await;
    assert_eq!(
        warn_log::count(warnings, "fleet::acl#", "fleet: Redis"),
        0,
        "no refusal, no outage"
    );
    let refused = server.acl_denials();
    assert!(refused.is_empty(), "Redis refused: {refused:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_open_message_holds_no_member_open() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::forged", 2, 1, 200).await;
    let (sentinel, _) = member("fleet::forged_sentinel", 200);
    members[0].0.join(&sentinel);
    settle().await;
    // Anyone who can PUBLISH: an open for a day, with no open key behind it.
    publish(&server, b"breaker-fleet/1 open evil 86400000 fleet::forged");
    // Then a real opening (key and message): once it is applied, the forgery was read.
    let set = server.command(&["SET", "{t:fleet::forged_sentinel}:open", "x", "PX", "5000"]);
    assert_eq!(set, "+OK");
    publish(
        &server,
        b"breaker-fleet/1 open other 5000 fleet::forged_sentinel",
    );
    wait_for("the sentinel open", WITHIN, || {
        sentinel.state() == State::Open
    })
    .await;
    for (_, b, _) in &members {
        let held = b.retry_in().unwrap_or_default();
        assert!(
            held < Duration::from_secs(1),
            "held open {held:?} by a message"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_slower_than_the_lease_is_still_the_only_probe() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::slow_probe", 2, 1, 300).await;
    for round in 0..2 {
        trip(&members[round].1);
        wait_for("every instance open", WITHIN, || {
            all_in(&members, State::Open)
        })
        .await;
        let (hits, _) = recover(&members, 1_500).await;
        assert_eq!(
            hits, 1,
            "round {round}: {hits} probes reached the dependency"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_wide_manual_control_reaches_late_joiners() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::manual", 2, 1, 200).await;
    members[0].0.force_open("fleet::manual").await.unwrap();
    wait_for("every instance forced open", WITHIN, || {
        all_in(&members, State::ForcedOpen)
    })
    .await;
    let late_fleet = fleet(&server, "fleet::manual#late", 1).await;
    let (late, _) = member("fleet::manual", 200);
    late_fleet.join(&late);
    wait_for("the late joiner forced open", WITHIN, || {
        late.state() == State::ForcedOpen
    })
    .await;
    members[1].0.disable("fleet::manual").await.unwrap();
    wait_for("every instance disabled", WITHIN, || {
        all_in(&members, State::Disabled) && late.state() == State::Disabled
    })
    .await;
    members[0].0.reset("fleet::manual").await.unwrap();
    wait_for("every instance reset", WITHIN, || {
        all_in(&members, State::Closed) && late.state() == State::Closed
    })
    .await;
    // Reset is kept too: a later joiner is not disabled.
    let (later, _) = member("fleet::manual", 200);
    late_fleet.join(&later);
    settle().await;
    assert_eq!(later.state(), State::Closed);
    // A forged manual message changes nothing: the key decides.
    publish(&server, b"breaker-fleet/1 forced evil 0 fleet::manual");
    trip(&members[0].1);
    wait_for("the opening spread", WITHIN, || {
        members[1].1.state() == State::Open
    })
    .await;
    assert_eq!(members[1].1.state(), State::Open, "not forced by a message");
}

/// `n` breakers named `prefix/i`, each joined to `f`.
fn many(f: &Fleet, prefix: &str, n: usize) -> Vec<Breaker> {
    (0..n)
        .map(|i| {
            let b = Breaker::new(format!("{prefix}/{i}"), Config::default().threshold(1));
            f.join(&b);
            b
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_joins_are_absorbed_in_well_under_a_second() {
    let server = RedisServer::start();
    let f = fleet(&server, "scale::joins#0", 1).await;
    let started = Instant::now();
    let members = many(&f, "scale::joins", 10_000);
    // An opening of the last member, published after the joins: applied once the task has
    // taken them all in.
    let last = "scale::joins/9999";
    let key = format!("{{t:{last}}}:open");
    assert_eq!(server.command(&["SET", &key, "x", "PX", "5000"]), "+OK");
    publish(
        &server,
        format!("breaker-fleet/1 open other 5000 {last}").as_bytes(),
    );
    wait_for("the last member open", WITHIN, || {
        members[9_999].state() == State::Open
    })
    .await;
    let took = started.elapsed();
    println!("10 000 joins and an opening absorbed in {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_fleet_of_ten_thousand_sends_about_one_command_a_second() {
    let server = RedisServer::start();
    let f = fleet(&server, "scale::idle#0", 1).await;
    let _members = many(&f, "scale::idle", 10_000);
    // Joins done (the task read every name's keys): then two seconds of idleness.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = server.commands();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = server.commands() - before - 1; // less the first reading
    println!("{sent} commands in 2 s from an idle instance with 10 000 members");
    assert!(sent <= 4, "{sent} commands in 2 s");
}

#[test]
fn killing_redis_stalls_a_current_thread_runtime_hosting_ten_thousand_members_very_little() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut server = RedisServer::start();
    rt.block_on(async {
        let f = fleet(&server, "scale::stall#0", 1).await;
        let members = many(&f, "scale::stall", 10_000);
        // The joins are taken in: an opening of the last member applied.
        let last = "scale::stall/9999";
        let key = format!("{{t:{last}}}:open");
        assert_eq!(server.command(&["SET", &key, "x", "PX", "60000"]), "+OK");
        publish(
            &server,
            format!("breaker-fleet/1 open other 60000 {last}").as_bytes(),
        );
        wait_for("the last member open", WITHIN, || {
            members[9_999].state() == State::Open
        })
        .await;
        let meter = StallMeter::start();
        server.kill();
        // The task learns the outage (the subscription ends) and ungates every member; the
        // ticker measures how long the runtime's one thread was kept meanwhile.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let worst = meter.stop().await;
        println!("worst stall with Redis killed: {worst:?}");
        assert!(worst < Duration::from_millis(500), "stalled {worst:?}");
    });
}

/// Issue 19's finding: a keyed breaker whose keys are fleet members, at `max_keys` under
/// churn, evicted every breaker with a failure streak (100 of 100 in 1.5 s; 0 without the
/// fleet), because the fleet's walks held every member and eviction took "held" for "in
/// flight". Members are held weakly now and eviction reads the breaker's own state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_breaker_in_a_fleet_evicts_fresh_keys_before_stateful_ones() {
    const STATEFUL: u64 = 100;
    const MAX_KEYS: u64 = 1_000;
    const CHURN: u64 = 20_000;
    let server = RedisServer::start();
    let evict_fleet = fleet(&server, "evict#0", 1).await;
    let keyed = breaker::KeyedBreaker::<u64>::new(
        "fleet::evict",
        Config::default()
            .threshold(5)
            .max_keys(MAX_KEYS as usize)
            .cool_off(Duration::from_secs(60)),
    );
    evict_fleet.join_keyed(&keyed);
    // 100 keys with a failure streak (closed, 3 of 5 failures), the rest fresh.
    for k in 0..STATEFUL {
        for _ in 0..3 {
            let _ = keyed.call_sync(&k, || Err::<(), _>("down"));
        }
    }
    for k in STATEFUL..MAX_KEYS {
        keyed.call_sync(&k, || Ok::<_, ()>(())).unwrap();
    }
    assert_eq!(keyed.len(), MAX_KEYS as usize);
    // Whoever holds breakers for a moment meanwhile (a dashboard's snapshot) changes nothing.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(SeqCst) {
                let _ = breaker::registry().snapshot();
                tokio::task::yield_now().await;
            }
        })
    };
    // Churn: 20 000 new keys at the bound, each a success, while the fleet takes in every
    // join and every leave (an evicted breaker leaves the fleet).
    for k in MAX_KEYS..MAX_KEYS + CHURN {
        keyed.call_sync(&k, || Ok::<_, ()>(())).unwrap();
        if k % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    stop.store(true, SeqCst);
    reader.await.unwrap();
    let evicted: Vec<u64> = (0..STATEFUL).filter(|k| !keyed.contains(k)).collect();
    assert!(
        evicted.is_empty(),
        "{} of {STATEFUL} breakers with a failure streak evicted: {evicted:?}",
        evicted.len()
    );
    assert_eq!(keyed.len(), MAX_KEYS as usize);
    // The churn did evict: the fresh keys of before are (nearly all) gone.
    let kept = (STATEFUL..MAX_KEYS).filter(|k| keyed.contains(k)).count();
    println!(
        "{kept} of {} fresh keys kept after the churn",
        MAX_KEYS - STATEFUL
    );
    assert!(
        kept < 90,
        "{kept} fresh keys kept: the churn evicted little"
    );
    // They are fleet members all along: another instance's opening reaches key 7's breaker.
    let other = fleet(&server, "evict#1", 1).await;
    let (twin, _) = member("fleet::evict[7]", 60_000);
    other.join(&twin);
    settle().await;
    trip(&twin);
    let seven = keyed.breaker(&7);
    wait_for("key 7 opened by the fleet", WITHIN, || {
        seven.state() == State::Open
    })
    .await;
    assert_eq!(
        seven.stats().failures,
        3,
        "the same breaker, its streak kept"
    );
}

// ---- Part three, hardened (issue 28) ----

/// Publishes a real opening of `sentinel` (its key, then its message) and waits until the
/// sentinel member opened: every message published before it has been read and applied
/// (the sentinel's name sorts after the others, so a shared read-back applies it last).
async fn after_a_sentinel(server: &RedisServer, sentinel: &Breaker) {
    let key = format!("{{t:{}}}:open", sentinel.name());
    assert_eq!(server.command(&["SET", &key, "x", "PX", "5000"]), "+OK");
    publish(
        server,
        format!("breaker-fleet/1 open other 5000 {}", sentinel.name()).as_bytes(),
    );
    wait_for("the sentinel open", WITHIN, || {
        sentinel.state() == State::Open
    })
    .await;
    // Whatever the same read-back applied after it.
    settle().await;
}

/// Issue 28, finding 1: a forged `reset` closed a member opened on its own and cleared its
/// counts. A reset is confirmed by the key that records it; a message alone changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_reset_neither_closes_nor_clears_a_member_opened_on_its_own() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::forged_reset", 2, 2, 60_000).await;
    let (sentinel, _) = member("fleet::forged_reset~sentinel", 60_000);
    members[0].0.join(&sentinel);
    settle().await;
    trip(&members[0].1); // alone: the quorum of 2 is not met, it is open locally
    assert_eq!(members[0].1.state(), State::Open);
    let before = members[0].1.stats();
    assert_eq!(before.failures, 1);
    publish(&server, b"breaker-fleet/1 reset evil 0 fleet::forged_reset");
    after_a_sentinel(&server, &sentinel).await;
    let b = &members[0].1;
    assert_eq!(b.state(), State::Open, "closed by a forged reset");
    assert_eq!(b.stats().failures, 1, "counts cleared by a forged reset");
    assert!(b.retry_in().unwrap() > Duration::from_secs(50));
    // A real reset still resets.
    members[1].0.reset("fleet::forged_reset").await.unwrap();
    wait_for("the real reset", WITHIN, || b.state() == State::Closed).await;
    assert_eq!(b.stats().failures, 0);
}

/// Issue 28, finding 1: with quorum 1, members held open by the fleet's gate (waiting for
/// the one probe) were closed by a forged `reset` or `close`: the one-probe rule bypassed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_resets_and_closes_leave_gated_members_waiting_for_the_probe() {
    let server = RedisServer::start();
    let members = instances(&server, "fleet::forged_gate", 2, 1, 300).await;
    // One sentinel in each instance: both have read the forgeries once both are open.
    let (sentinel, _) = member("fleet::forged_gate~sentinel", 60_000);
    members[1].0.join(&sentinel);
    let (sentinel_0, _) = member("fleet::forged_gate~sentinel", 60_000);
    members[0].0.join(&sentinel_0);
    settle().await;
    trip(&members[0].1);
    wait_for("every instance open", WITHIN, || {
        all_in(&members, State::Open)
    })
    .await;
    // The fleet's open period ends: both stay open, gated, until the fleet's probe (no call
    // comes, so nobody asks for it).
    wait_for("the open period to end", WITHIN, || {
        members
            .iter()
            .all(|(_, b, _)| b.retry_in() == Some(Duration::ZERO))
    })
    .await;
    publish(&server, b"breaker-fleet/1 reset evil 0 fleet::forged_gate");
    publish(&server, b"breaker-fleet/1 close evil 0 fleet::forged_gate");
    after_a_sentinel(&server, &sentinel).await;
    wait_for("the other sentinel open", WITHIN, || {
        sentinel_0.state() == State::Open
    })
    .await;
    for (_, b, _) in &members {
        assert_eq!(
            b.state(),
            State::Open,
            "a forged message closed a gated member"
        );
        assert_eq!(b.retry_in(), Some(Duration::ZERO), "held for the probe");
    }
    // The one probe still closes them all.
    let (hits, _) = recover(&members, 20).await;
    assert_eq!(hits, 1);
}

/// Issue 28, finding 2: every 2 s resync re-armed each open name's armed deadline (one more
/// heap entry per name per resync, popped only when the deadline passed: 1.15 GB an hour at
/// 20 000 names open for an hour), and read every open name back (3 commands a name every
/// 2 s: 30 000 a second at 20 000 names). Entries stay flat over resyncs, and the resync
/// reads at most 1 024 names a period, in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_open_for_long_keep_the_timers_and_the_traffic_flat() {
    const NAMES: usize = 2_500;
    let server = RedisServer::start();
    let opener = fleet(&server, "flat#0", 1).await;
    let watcher = fleet(&server, "flat#1", 1).await;
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    for i in 0..NAMES {
        let name = format!("flat/{i}");
        let config = || {
            Config::default()
                .threshold(1)
                .cool_off(Duration::from_secs(3_600))
        };
        let b = Breaker::new(name.as_str(), config());
        opener.join(&b);
        theirs.push(b);
        let b = Breaker::new(
            name.as_str(),
            config().max_cool_off(Duration::from_secs(3_600)),
        );
        watcher.join(&b);
        ours.push(b);
    }
    settle().await;
    for b in &theirs {
        trip(b);
    }
    wait_for("every name open here", WITHIN, || {
        ours.iter().all(|b| b.state() == State::Open)
    })
    .await;
    let mut entries = Vec::new();
    let mut commands = Vec::new();
    let mut last = server.commands();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(2_100)).await; // one resync each
        entries.push(watcher.timer_entries().await);
        let now = server.commands();
        commands.push(now - last);
        last = now;
    }
    println!("timer entries per resync: {entries:?}; Redis commands: {commands:?}");
    for n in &entries {
        assert!(
            *n <= NAMES + 8,
            "{n} timer entries for {NAMES} open names: {entries:?}"
        );
    }
    // Two instances, each at most 1 024 names (3 reads each) a period, and a PING or so.
    for n in &commands[1..] {
        assert!(
            *n <= 2 * 3 * 1_024 + 16,
            "{n} Redis commands in a resync period: {commands:?}"
        );
    }
}

/// Issue 28, finding 8: a member gated by one fleet stayed gated (`Open`, no retry) after
/// it joined another, long past its cool-off: nothing released the gate of the fleet left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_a_fleet_releases_its_gate_and_the_member_follows_only_the_new_one() {
    const NAME: &str = "fleet::moved";
    let server = RedisServer::start();
    let first = instances(&server, NAME, 2, 1, 300).await;
    let (_, x, _) = &first[0];
    trip(&first[1].1);
    wait_for("x open by the first fleet", WITHIN, || {
        x.state() == State::Open
    })
    .await;
    wait_for("x gated, waiting for the fleet's probe", WITHIN, || {
        x.retry_in() == Some(Duration::ZERO)
    })
    .await;
    // x joins a second fleet (another prefix on the same Redis), where the name is closed.
    let second = |i: usize| {
        Fleet::builder(server.url())
            .instance(format!("moved#{i}"))
            .prefix("u")
            .connect()
    };
    let (b0, b1) = (second(0).await.unwrap(), second(1).await.unwrap());
    b0.join(x);
    settle().await;
    // The first fleet's gate is gone: x probes by itself, and a success closes it.
    close_by_calls(x).await;
    assert_eq!(x.state(), State::Closed);
    // An opening in the first fleet no longer reaches x ...
    close_by_calls(&first[1].1).await;
    trip(&first[1].1);
    wait_for("the first fleet's key", WITHIN, || {
        server.command(&["EXISTS", "{t:fleet::moved}:open"]) == ":1"
    })
    .await;
    // ... one in the second does.
    let (y, _) = member(NAME, 300);
    b1.join(&y);
    settle().await;
    assert_eq!(x.state(), State::Closed, "x followed the fleet it left");
    trip(&y);
    wait_for("x open by the second fleet", WITHIN, || {
        x.state() == State::Open
    })
    .await;
}

/// Issue 28, finding 13: the fleet knew a member by its name's text pointer, and equal
/// static texts share one: of two breakers with one name (two functions sharing a default
/// name), only the first joined, and only it followed the fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_breakers_with_one_name_text_are_two_members() {
    static TEXT: &str = "fleet::one_text";
    let server = RedisServer::start();
    let here = fleet(&server, "one_text#0", 1).await;
    let config = || {
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(30))
    };
    let alpha = Breaker::new_named(breaker::Name::from_static(&TEXT), config());
    let beta = Breaker::new_named(breaker::Name::from_static(&TEXT), config());
    here.join(&alpha);
    here.join(&beta);
    let there = fleet(&server, "one_text#1", 1).await;
    let (other, _) = member(TEXT, 30_000);
    there.join(&other);
    settle().await;
    trip(&other);
    wait_for("both breakers of the name open", WITHIN, || {
        alpha.state() == State::Open && beta.state() == State::Open
    })
    .await;
}

/// Issue 28, finding 10: the WARN for a transaction Redis discarded said `EXECABORT` and
/// nothing more, so a full Redis and a read-only replica looked the same. It names the
/// command's own error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discarded_transaction_is_warned_of_by_its_commands_own_error() {
    let warnings = warn_log::install();
    let server = RedisServer::start();
    let members = instances(&server, "fleet::oom", 2, 1, 200).await;
    // Redis is full and evicts nothing: every write is refused with OOM.
    assert_eq!(
        server.command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        "+OK"
    );
    assert_eq!(server.command(&["CONFIG", "SET", "maxmemory", "1"]), "+OK");
    trip(&members[0].1); // the opening's transaction (SET, DEL, PUBLISH) is discarded
    wait_for("a WARN naming OOM", WITHIN, || {
        warn_log::count(warnings, "fleet::oom#", "OOM") >= 1
    })
    .await;
    let lines = warnings.lock().unwrap().clone();
    let line = lines
        .iter()
        .find(|(i, m)| i.starts_with("fleet::oom#") && m.contains("refused"))
        .map(|(_, m)| m.clone())
        .unwrap();
    println!("{line}");
    assert!(line.contains("OOM command not allowed"), "{line}");
    // Nothing was held open by the refusal: the member is a local breaker.
    close_by_calls(&members[0].1).await;
}

/// Issue 28, finding 11: `Fleet::connect` with Redis down at startup failed, and a service
/// had to choose between not starting and running without its fleet for good. It starts:
/// its members are local breakers until Redis answers (one WARN), then join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_starts_without_redis_and_joins_once_redis_answers() {
    const NAME: &str = "fleet::no_redis_yet";
    let warnings = warn_log::install();
    let mut server = RedisServer::start();
    server.kill(); // nothing listens on its port now
    let here = fleet(&server, "no_redis_yet#0", 1).await;
    let (b, _) = member(NAME, 200);
    here.join(&b);
    // A local breaker meanwhile: it opens and closes by itself.
    trip(&b);
    assert_eq!(b.state(), State::Open);
    close_by_calls(&b).await;
    wait_for("one WARN", WITHIN, || {
        warn_log::count(warnings, "no_redis_yet#0", "unreachable at startup") == 1
    })
    .await;
    server.restart();
    let there = fleet(&server, "no_redis_yet#1", 1).await;
    let (other, _) = member(NAME, 10_000);
    there.join(&other);
    settle().await;
    // Another instance opens the name: once this fleet is connected, it reads it back.
    trip(&other);
    wait_for("the member open by the fleet", WITHIN, || {
        b.state() == State::Open
    })
    .await;
    assert!(b.retry_in().unwrap() > Duration::from_secs(5));
    assert_eq!(
        warn_log::count(warnings, "no_redis_yet#0", "fleet: Redis unreachable"),
        1,
        "one WARN for the whole outage"
    );
    wait_for("the INFO that it is over", WITHIN, || {
        warn_log::count(warnings, "no_redis_yet#0", "fleet: Redis is back") == 1
    })
    .await;
}

/// Issue 35 (DESIGN: "a fleet member applies its own cap to an opening it hears"): an
/// instance whose breaker opens for an hour held every member of the fleet open for that
/// hour. A member is held at most its own cap (`max_cool_off`, else the default cap of an
/// `OpenFor`); then it may ask for the one probe, whose success closes the fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heard_opening_holds_a_member_at_most_its_own_cap() {
    const NAME: &str = "fleet::capped";
    let server = RedisServer::start();
    let long = fleet(&server, "capped#0", 1).await;
    let hour = Breaker::new(
        NAME,
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(3_600)),
    );
    long.join(&hour);
    let short = fleet(&server, "capped#1", 1).await;
    let capped = Breaker::new(
        NAME,
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(200))
            .max_cool_off(Duration::from_secs(1)),
    );
    short.join(&capped);
    settle().await;
    trip(&hour);
    wait_for("the capped member open", WITHIN, || {
        capped.state() == State::Open
    })
    .await;
    let held = capped.retry_in().unwrap();
    assert!(
        held <= Duration::from_secs(1),
        "held {held:?} by a heard opening"
    );
    // Past its cap it asks for the probe (the hour-long key notwithstanding), and the
    // probe's success closes the fleet: the long instance too.
    let started = Instant::now();
    close_by_calls(&capped).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    wait_for(
        "the hour-long member closed by the fleet's probe",
        WITHIN,
        || hour.state() == State::Closed,
    )
    .await;
    assert_eq!(server.command(&["EXISTS", "{t:fleet::capped}:open"]), ":0");
    // A resync later, nothing holds it again.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    assert_eq!(capped.state(), State::Closed);
}

/// Waits until the fleet has taken in the joins of `keyed`'s keys `0..keys`: the last key's
/// name opens in Redis (its key and the message) and that key follows.
async fn all_joins_taken_in(server: &RedisServer, keyed: &breaker::KeyedBreaker<u64>, keys: u64) {
    let last = keyed.breaker(&(keys - 1));
    let name = last.name().to_owned();
    assert_eq!(
        server.command(&["SET", &format!("{{t:{name}}}:open"), "x", "PX", "60000"]),
        "+OK"
    );
    publish(
        server,
        format!("breaker-fleet/1 open other 60000 {name}").as_bytes(),
    );
    wait_for("the joins taken in", WITHIN * 3, || {
        last.state() == State::Open
    })
    .await;
}

/// Issue 28's suspected defect, confirmed: tens of thousands of keyed members opening at
/// once delayed the propagation of another opening behind them. 20 000 keys of instance A
/// fail at once, then A's member of another name opens: B's member of that name opened
/// 11.0 s later (debug build, loopback), A writing each opening in its own round trip. A
/// burst's openings now go in one transaction per batch: 1.5-1.6 s, nearly all of it A's
/// task taking in 20 000 transitions (B follows within 50 ms of A's write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mass_opening_of_keyed_members_delays_another_opening_little() {
    const KEYS: u64 = 20_000;
    let server = RedisServer::start();
    let fleet_a = fleet(&server, "mass#0", 1).await;
    let fleet_b = fleet(&server, "mass#1", 1).await;
    let config = || {
        Config::default()
            .threshold(1)
            .max_keys(KEYS as usize)
            .cool_off(Duration::from_secs(60))
    };
    let a = breaker::KeyedBreaker::<u64>::new("fleet::mass", config());
    fleet_a.join_keyed(&a);
    let b = breaker::KeyedBreaker::<u64>::new("fleet::mass", config());
    fleet_b.join_keyed(&b);
    for k in 0..KEYS {
        a.call_sync(&k, || Ok::<_, ()>(())).unwrap();
        b.call_sync(&k, || Ok::<_, ()>(())).unwrap();
        if k % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let (late_a, _) = member("fleet::mass_late", 60_000);
    fleet_a.join(&late_a);
    let (late_b, _) = member("fleet::mass_late", 60_000);
    fleet_b.join(&late_b);
    // Every join taken in: an opening of B's last key reaches it.
    all_joins_taken_in(&server, &b, KEYS).await;
    let b_last = b.breaker(&(KEYS - 2));
    // The mass opening: every key of A fails at once, then one more name opens.
    let started = Instant::now();
    for k in 0..KEYS {
        let _ = a.call_sync(&k, || Err::<(), _>("down"));
    }
    let failed = started.elapsed();
    trip(&late_a);
    let tripped = Instant::now();
    wait_for("A's write of the other name's opening", WITHIN * 3, || {
        server.command(&["EXISTS", "{t:fleet::mass_late}:open"]) == ":1"
    })
    .await;
    let written = tripped.elapsed();
    wait_for("B's member of the other name open", WITHIN * 3, || {
        late_b.state() == State::Open
    })
    .await;
    let behind = tripped.elapsed();
    wait_for("B's keys open", WITHIN * 3, || {
        b_last.state() == State::Open
    })
    .await;
    let all = started.elapsed();
    println!(
        "{KEYS} keys failed in {failed:?}; another opening was written by A {written:?} and \
         reached B {behind:?} after it happened; B's keys all open {all:?} after the first \
         failure"
    );
    // An order of magnitude over what it measures alone (2.6 s): a run with every other
    // suite beside it (nextest, the doctests and the trybuild cases compiling) took 20 s.
    assert!(behind < Duration::from_secs(30), "{behind:?}");
}

/// DESIGN (part three, hardened): "Fleet openings of keyed members respect the cap too".
/// Another instance opening every key's name opened every key here, past
/// `max_open_percent`: the fleet's openings did not ask for a place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_openings_of_keyed_members_respect_max_open() {
    const KEYS: u64 = 20;
    let server = RedisServer::start();
    let mine = fleet(&server, "capkeys#0", 1).await;
    let keyed = breaker::KeyedBreaker::<u64>::new(
        "fleet::capkeys",
        Config::default()
            .threshold(1)
            .max_open_percent(10)
            .cool_off(Duration::from_secs(30)),
    );
    mine.join_keyed(&keyed);
    for k in 0..KEYS {
        keyed.call_sync(&k, || Ok::<_, ()>(())).unwrap();
    }
    let other = fleet(&server, "capkeys#1", 1).await;
    let mut theirs = Vec::new();
    for k in 0..KEYS {
        let (b, _) = member(&format!("fleet::capkeys[{k}]"), 30_000);
        other.join(&b);
        theirs.push(b);
    }
    let (sentinel, _) = member("fleet::capkeys~sentinel", 30_000);
    mine.join(&sentinel);
    settle().await;
    for b in &theirs {
        trip(b);
    }
    let open = || {
        (0..KEYS)
            .filter(|k| keyed.breaker(k).state() == State::Open)
            .count()
    };
    wait_for("the keys' places taken", WITHIN, || open() >= 2).await;
    after_a_sentinel(&server, &sentinel).await;
    let n = open();
    assert_eq!(n, 2, "{n} of {KEYS} keys open under max_open_percent(10)");
}

/// The same burst with a quorum of 2: each opening is first tallied in Redis (its trip key
/// and the set of instances that tripped), name by name. Measured, not batched: the tally
/// of an opening behind 20 000 is written 2.6 s after it (debug build, loopback), a
/// sanity bound here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mass_opening_with_a_quorum_delays_another_tally_little() {
    const KEYS: u64 = 20_000;
    let server = RedisServer::start();
    let qfleet = fleet(&server, "qmass#0", 2).await;
    let keyed = breaker::KeyedBreaker::<u64>::new(
        "fleet::qmass",
        Config::default()
            .threshold(1)
            .max_keys(KEYS as usize)
            .cool_off(Duration::from_secs(60)),
    );
    qfleet.join_keyed(&keyed);
    for k in 0..KEYS {
        keyed.call_sync(&k, || Ok::<_, ()>(())).unwrap();
        if k % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let (late, _) = member("fleet::qmass_late", 60_000);
    qfleet.join(&late);
    all_joins_taken_in(&server, &keyed, KEYS).await;
    let started = Instant::now();
    for k in 0..KEYS - 1 {
        let _ = keyed.call_sync(&k, || Err::<(), _>("down"));
    }
    trip(&late);
    let tripped = Instant::now();
    wait_for("the late tally written", WITHIN * 6, || {
        server.command(&["EXISTS", "{t:fleet::qmass_late}:trip:qmass#0"]) == ":1"
    })
    .await;
    let behind = tripped.elapsed();
    println!(
        "quorum 2: {} keys failed in {:?}; the tally behind them written {behind:?} after",
        KEYS - 1,
        tripped - started
    );
    // An order of magnitude over what it measures alone (2.6 s): a run with every other
    // suite beside it (nextest, the doctests and the trybuild cases compiling) took 20 s.
    assert!(behind < Duration::from_secs(30), "{behind:?}");
}

/// Breakers made by a keyed breaker of one's own (a tower layer's, the reqwest middleware's)
/// join through public API: `Fleet::join_keyed`, before the first request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_breakers_new_keys_join_through_join_keyed() {
    let server = RedisServer::start();
    let config = Config::default()
        .threshold(1)
        .cool_off(Duration::from_secs(30));
    let a = fleet(&server, "fleet::join_keyed#a", 1).await;
    let b = fleet(&server, "fleet::join_keyed#b", 1).await;
    let on_a = breaker::KeyedBreaker::<String>::new("fleet::join_keyed", config.clone());
    let on_b = breaker::KeyedBreaker::<String>::new("fleet::join_keyed", config);
    // Made before the join: stays local.
    let local = on_b.breaker("local");
    a.join_keyed(&on_a);
    b.join_keyed(&on_b);
    let host_on_b = on_b.breaker("h1");
    settle().await;

    let _ = on_a.call_sync("h1", || Err::<(), _>("down"));
    assert_eq!(on_a.breaker("h1").state(), State::Open);
    wait_for("instance b's key to open", WITHIN, || {
        host_on_b.state() == State::Open
    })
    .await;

    let _ = on_a.call_sync("local", || Err::<(), _>("down"));
    settle().await;
    settle().await;
    assert_eq!(
        local.state(),
        State::Closed,
        "a key made before the join is local"
    );
}

/// A fleet's probe closes every instance, and each starts its own ramp: right after the
/// fleet's close, an instance that did not probe (closed by the fleet) sheds almost every
/// call as throttled (admitted with probability `t / ramp`, `t` a few seconds at most of
/// a ten-minute ramp), counted in its statistics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleets_close_starts_each_members_ramp() {
    let server = RedisServer::start();
    let mut members = Vec::new();
    for i in 0..3 {
        let f = fleet(&server, &format!("fleet::ramp#{i}"), 1).await;
        let log: Log = Arc::default();
        let seen = log.clone();
        let config = Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(300))
            .ramp(Duration::from_secs(600))
            .on_state_change(move |t| seen.lock().unwrap().push((t.to, t.cause)));
        let b = Breaker::new("fleet::ramp", config);
        f.join(&b);
        members.push((f, b, log));
    }
    settle().await;
    trip(&members[0].1);
    wait_for("every instance open", WITHIN, || {
        all_in(&members, State::Open)
    })
    .await;
    // Instance 0 probes (once its open period ends and the fleet grants it the lease).
    let prober = &members[0].1;
    wait_for("the probe to close the fleet", WITHIN, || {
        let _ = prober.call_sync(|| Ok::<_, ()>(()));
        all_in(&members, State::Closed)
    })
    .await;
    for (_, b, log) in &members[1..] {
        assert_eq!(
            log.lock().unwrap().last(),
            Some(&(State::Closed, Cause::Fleet))
        );
        let before = b.stats();
        let mut shed = 0;
        for _ in 0..20 {
            match b.call_sync(|| Ok::<_, ()>(())) {
                Ok(()) => {}
                Err(breaker::CallError::Breaker(e)) if e.is_throttled() => shed += 1,
                Err(e) => panic!("refused other than by the ramp: {e:?}"),
            }
        }
        assert!(shed >= 15, "only {shed} of 20 calls shed by the ramp");
        assert_eq!(b.stats().throttled - before.throttled, shed);
        assert_eq!(b.state(), State::Closed, "shedding is not a failure");
    }
}

/// The fleet's gated probe with Redis killed: one instance holds the fleet's probe lease
/// and its probe hangs, the other waits gated (its own cool-off over, it does not probe).
/// Redis killed, the waiting instance is ungated and behaves as a local breaker: its own
/// probe runs and closes it, without waiting for the hung one; that one closes by its own
/// probe when it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_under_the_gate_lets_each_instance_probe_for_itself() {
    let mut server = RedisServer::start();
    // The instances whose probe started, in order; the first hangs until `hold` drops.
    let started = Arc::new(Mutex::new(Vec::<usize>::new()));
    let hold = Arc::new(AtomicBool::new(true));
    let mut members = Vec::new();
    for i in 0..2 {
        let f = fleet(&server, &format!("fleet::probe_outage#{i}"), 1).await;
        let (started, hold) = (started.clone(), hold.clone());
        let config = Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(300))
            // The probe's lease: longer than the test holds it.
            .timeout(Duration::from_secs(60))
            .probe(move || {
                let (started, hold) = (started.clone(), hold.clone());
                async move {
                    let first = {
                        let mut started = started.lock().unwrap();
                        started.push(i);
                        started.len() == 1
                    };
                    while first && hold.load(SeqCst) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Ok::<_, ()>(())
                }
            });
        let b = Breaker::new("fleet::probe_outage", config);
        f.join(&b);
        members.push((f, b));
    }
    settle().await;
    let r = members[0].1.call_sync(|| Err::<(), _>("down"));
    assert!(r.is_err());
    wait_for("the fleet's probe to start", WITHIN, || {
        !started.lock().unwrap().is_empty()
    })
    .await;
    let probing = started.lock().unwrap()[0];
    let waiting = &members[1 - probing].1;
    // Past its own cool-off, the other instance waits on the fleet's probe: gated, open.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(*started.lock().unwrap(), [probing], "one probe while gated");
    assert_eq!(waiting.state(), State::Open);
    server.kill();
    wait_for(
        "the waiting instance to probe and close by itself",
        WITHIN,
        || waiting.state() == State::Closed,
    )
    .await;
    assert_eq!(*started.lock().unwrap(), [probing, 1 - probing]);
    assert_eq!(waiting.stats().successes, 1, "its own probe closed it");
    let hung = &members[probing].1;
    assert_eq!(hung.state(), State::HalfOpen, "the first probe still hangs");
    hold.store(false, SeqCst);
    wait_for("the probing instance to close", WITHIN, || {
        hung.state() == State::Closed
    })
    .await;
}
