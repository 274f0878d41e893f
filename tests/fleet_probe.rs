//! Recovery without traffic in a fleet (`Config::probe`): against a real `redis-server`,
//! only the instance holding the fleet's probe lease runs the probe, and every instance
//! closes by its one result. Real time; conditions awaited by polling with a bound.
#![cfg(feature = "redis")]

#[path = "support/redis.rs"]
#[allow(dead_code)] // the cluster's helpers are tests/fleet_cluster.rs's
mod redis_server;

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering::SeqCst},
        Arc,
    },
    time::{Duration, Instant},
};

use breaker::{fleet::Fleet, Breaker, Config, State};
use redis_server::RedisServer;

/// As tests/fleet.rs: generous, for a busy CI machine; passing runs take well under it.
const WITHIN: Duration = Duration::from_secs(20);

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WITHIN;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Two instances, no user call after the opening: the dependency gets one probe, not two,
/// and both instances close. Then, with the dependency down, one failed probe per opening
/// reopens both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_sends_one_probe_and_every_instance_closes() {
    let server = RedisServer::start();
    let probes = Arc::new(AtomicU32::new(0));
    let healthy = Arc::new(AtomicBool::new(true));
    // Probes running at once, and the most seen.
    let running = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let mut members = Vec::new();
    for i in 0..2 {
        let fleet = Fleet::builder(server.url())
            .instance(format!("fleet_probe#{i}"))
            .prefix("t")
            .connect()
            .await
            .expect("connect to the test's redis-server");
        let (probes, healthy) = (probes.clone(), healthy.clone());
        let (running, most) = (running.clone(), most.clone());
        let config = Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(300))
            .probe(move || {
                let (probes, healthy) = (probes.clone(), healthy.clone());
                let (running, most) = (running.clone(), most.clone());
                async move {
                    probes.fetch_add(1, SeqCst);
                    most.fetch_max(running.fetch_add(1, SeqCst) + 1, SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    running.fetch_sub(1, SeqCst);
                    if healthy.load(SeqCst) {
                        Ok(())
                    } else {
                        Err("still down")
                    }
                }
            });
        let b = Breaker::new("fleet_probe::quiet", config);
        fleet.join(&b);
        members.push((fleet, b));
    }
    tokio::time::sleep(Duration::from_millis(100)).await; // the joins reach the tasks
    let all = |members: &[(Fleet, Breaker)], s: State| members.iter().all(|(_, b)| b.state() == s);

    let r = members[0].1.call_sync(|| Err::<(), _>("down"));
    assert!(r.is_err());
    wait_for("both open", || all(&members, State::Open)).await;
    let started = Instant::now();
    wait_for("both closed by the probe", || all(&members, State::Closed)).await;
    println!("closed {:?} after the opening spread", started.elapsed());
    assert_eq!(
        probes.load(SeqCst),
        1,
        "one probe for the fleet, not one per instance"
    );
    for (_, b) in &members {
        assert_eq!(b.stats().rejected, 0, "no user call was made");
    }

    // Down: each opening of the fleet is probed once, and the failure reopens both.
    healthy.store(false, SeqCst);
    let r = members[1].1.call_sync(|| Err::<(), _>("down"));
    assert!(r.is_err());
    wait_for("both open", || all(&members, State::Open)).await;
    // Two failed probes (the opening's, then the reopening's): still open, both.
    wait_for("two failed probes", || {
        probes.load(SeqCst) >= 3 && running.load(SeqCst) == 0
    })
    .await;
    wait_for("both open again", || all(&members, State::Open)).await;
    healthy.store(true, SeqCst);
    wait_for("both closed again", || all(&members, State::Closed)).await;
    assert_eq!(most.load(SeqCst), 1, "two instances probed at once");
    drop(members);
}

/// A member switched to a dry run by `reconfigure` after it joined publishes nothing: its
/// opening on paper opens no other instance (a fleet never takes a dry-run breaker in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_switched_to_a_dry_run_publishes_nothing() {
    let server = RedisServer::start();
    let config = || {
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(60))
    };
    let mut members = Vec::new();
    for i in 0..2 {
        let fleet = Fleet::builder(server.url())
            .instance(format!("fleet_dry#{i}"))
            .prefix("t")
            .connect()
            .await
            .expect("connect to the test's redis-server");
        let b = Breaker::new("fleet_probe::dry", config());
        fleet.join(&b);
        members.push((fleet, b));
    }
    tokio::time::sleep(Duration::from_millis(100)).await; // the joins reach the tasks
    members[0].1.reconfigure(config().dry_run(true)).unwrap();
    let r = members[0].1.call_sync(|| Err::<(), _>("down"));
    assert!(r.is_err());
    assert_eq!(members[0].1.state(), State::Open, "open on paper");
    // A sentinel of the same fleets, enforcing: its opening reaches the other instance, so
    // once it has, the dry run's would have too.
    let sentinels: Vec<_> = members
        .iter()
        .map(|(f, _)| {
            let b = Breaker::new("fleet_probe::sentinel", config());
            f.join(&b);
            b
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = sentinels[0].call_sync(|| Err::<(), _>("down"));
    assert!(r.is_err());
    wait_for("the sentinel's opening to spread", || {
        sentinels[1].state() == State::Open
    })
    .await;
    assert_eq!(
        members[1].1.state(),
        State::Closed,
        "the dry run published its opening"
    );
    drop(members);
}
