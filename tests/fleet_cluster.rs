//! Fleets on a real Redis Cluster (Redis ≥ 7: sharded pub/sub) that each test starts on
//! free loopback ports: six `redis-server --cluster-enabled yes`, three masters and three
//! replicas, joined with `redis-cli --cluster create` (tests/support/redis.rs). Real time,
//! conditions awaited by polling with a bounded deadline.
#![cfg(feature = "redis")]

#[path = "support/redis.rs"]
#[allow(dead_code)]
mod redis_server;

use std::time::{Duration, Instant};

use breaker::{fleet::Fleet, Breaker, Config, State};
use redis_server::RedisCluster;

const WITHIN: Duration = Duration::from_secs(30);

async fn fleet(cluster: &RedisCluster, instance: &str) -> Fleet {
    Fleet::cluster(cluster.urls())
        .instance(instance)
        .prefix("t")
        .connect()
        .await
        .expect("connect to the test's cluster")
}

fn member(name: &str, cool_off_ms: u64) -> Breaker {
    let config = Config::default()
        .threshold(1)
        .cool_off(Duration::from_millis(cool_off_ms));
    Breaker::new(name, config)
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WITHIN;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {WITHIN:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn trip(b: &Breaker) {
    assert!(b.call_sync(|| Err::<(), _>("down")).is_err());
}

/// Calls a working dependency through `b` until it is closed; returns the calls that ran.
async fn close_by_calls(b: &Breaker) -> u32 {
    let deadline = Instant::now() + WITHIN;
    let mut ran = 0;
    while b.state() != State::Closed {
        assert!(Instant::now() < deadline, "{} stayed open", b.name());
        if b.call(async { Ok::<_, ()>(()) }).await.is_ok() {
            ran += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    ran
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openings_spread_and_one_probe_closes_the_fleet_on_a_cluster() {
    let cluster = RedisCluster::start();
    // Names on different shards (their hash tags differ): each on its own channel.
    let names = ["cluster::a", "cluster::b", "cluster::c"];
    let mut fleets = Vec::new();
    let mut members = Vec::new();
    for i in 0..3 {
        let f = fleet(&cluster, &format!("cluster#{i}")).await;
        let row: Vec<Breaker> = names.iter().map(|n| member(n, 300)).collect();
        for b in &row {
            f.join(b);
        }
        fleets.push(f);
        members.push(row);
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // the joins' SSUBSCRIBEs
    for (j, name) in names.iter().enumerate() {
        trip(&members[j % 3][j]);
        wait_for(&format!("{name} open everywhere"), || {
            members.iter().all(|row| row[j].state() == State::Open)
        })
        .await;
        // One probe for the fleet: every instance calls until its member is closed.
        let mut probes = 0;
        for row in &members {
            probes += close_by_calls(&row[j]).await;
        }
        assert_eq!(probes, 1, "{name}: {probes} calls reached the dependency");
    }
    fleets[0].force_open("cluster::b").await.unwrap();
    wait_for("cluster::b forced open everywhere", || {
        members
            .iter()
            .all(|row| row[1].state() == State::ForcedOpen)
    })
    .await;
    fleets[2].reset("cluster::b").await.unwrap();
    wait_for("cluster::b reset everywhere", || {
        members.iter().all(|row| row[1].state() == State::Closed)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_failover_leaves_members_local_then_the_fleet_resyncs() {
    let mut cluster = RedisCluster::start();
    let name = "cluster::failover";
    let mut fleets = Vec::new();
    let mut members = Vec::new();
    for i in 0..2 {
        let f = fleet(&cluster, &format!("failover#{i}")).await;
        let b = member(name, 400);
        f.join(&b);
        fleets.push(f);
        members.push(b);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    trip(&members[0]);
    wait_for("every instance open", || {
        members.iter().all(|b| b.state() == State::Open)
    })
    .await;
    // The master of the name's shard dies: its replica takes over after the node timeout.
    let key = format!("{{t:{name}}}:open");
    cluster.master_of(&key).kill();
    // Meanwhile each member is a local breaker: it closes by its own probe.
    for b in &members {
        close_by_calls(b).await;
    }
    cluster.await_master(&key);
    // The fleet works again on the promoted replica: an opening spreads.
    let deadline = Instant::now() + WITHIN;
    loop {
        trip(&members[1]);
        let spread = Instant::now() + Duration::from_secs(1);
        while Instant::now() < spread && members[0].state() != State::Open {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if members[0].state() == State::Open {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the fleet did not come back after the failover"
        );
        for b in &members {
            close_by_calls(b).await;
        }
    }
}

/// The ACL the README documents for a fleet on a cluster, with prefix `t` (see
/// src/fleet/mod.rs): the names' keys and sharded channels, the fleet's commands, and what
/// the cluster client sends itself (`CLUSTER SLOTS` for the topology, `PING` to check a new
/// connection; `HELLO` and `AUTH` need no permission). Each item was found necessary by
/// removing it (the cluster client cannot connect without `cluster|slots`; `ping` is refused
/// in `ACL LOG` without it); `+sadd +srem +smembers +exists` only serve `quorum(n)`, n ≥ 2.
const CLUSTER_ACL: &[&str] = &[
    "~{t:*",
    "&{t:*",
    "-@all",
    "+ping",
    "+pttl",
    "+get",
    "+set",
    "+del",
    "+pexpire",
    "+sadd",
    "+srem",
    "+smembers",
    "+exists",
    "+eval",
    "+spublish",
    "+ssubscribe",
    "+multi",
    "+exec",
    "+cluster|slots",
];

/// What Redis refused, over every node: their `ACL LOG`s.
fn denied(cluster: &RedisCluster) -> Vec<String> {
    cluster.nodes.iter().flat_map(|n| n.acl_denials()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_is_all_a_fleet_on_a_cluster_needs() {
    let cluster = RedisCluster::start();
    // ACLs are per node on a cluster: the same user on all six.
    for node in &cluster.nodes {
        let mut args = vec!["ACL", "SETUSER", "fleet", "reset", "on", ">pw"];
        args.extend_from_slice(CLUSTER_ACL);
        assert_eq!(node.command(&args), "+OK");
    }
    let urls: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("redis://fleet:pw@127.0.0.1:{}/", n.port))
        .collect();
    let names = ["cluster_acl::a", "cluster_acl::b"];
    let mut fleets = Vec::new();
    let mut members = Vec::new();
    for i in 0..2 {
        let f = Fleet::cluster(urls.clone())
            .instance(format!("cluster_acl#{i}"))
            .prefix("t")
            .connect()
            .await
            .expect("connect as the fleet's user");
        let row: Vec<Breaker> = names.iter().map(|n| member(n, 300)).collect();
        for b in &row {
            f.join(b);
        }
        fleets.push(f);
        members.push(row);
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // the joins' SSUBSCRIBEs
    for (j, name) in names.iter().enumerate() {
        trip(&members[j][j]);
        wait_for(&format!("{name} open everywhere"), || {
            members.iter().all(|row| row[j].state() == State::Open)
        })
        .await;
        let mut probes = 0;
        for row in &members {
            probes += close_by_calls(&row[j]).await;
        }
        assert_eq!(probes, 1, "{name}: {probes} calls reached the dependency");
    }
    fleets[0].force_open("cluster_acl::a").await.unwrap();
    wait_for("cluster_acl::a forced open everywhere", || {
        members
            .iter()
            .all(|row| row[0].state() == State::ForcedOpen)
    })
    .await;
    fleets[1].reset("cluster_acl::a").await.unwrap();
    wait_for("cluster_acl::a reset everywhere", || {
        members.iter().all(|row| row[0].state() == State::Closed)
    })
    .await;
    let refused = denied(&cluster);
    assert!(refused.is_empty(), "Redis refused: {refused:#?}");
}
