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
    fleet_at(cluster.urls(), instance).await
}

async fn fleet_at(urls: Vec<String>, instance: &str) -> Fleet {
    Fleet::cluster(urls)
        .instance(instance)
        .prefix("t")
        .connect()
        .await
        .expect("connect to the test's cluster")
}

/// `n` instances (`{tag}#{i}`), each its own fleet on `urls` with a member of each name.
async fn instances(
    urls: &[String],
    tag: &str,
    n: usize,
    names: &[&str],
) -> (Vec<Fleet>, Vec<Vec<Breaker>>) {
    let mut fleets = Vec::new();
    let mut members = Vec::new();
    for i in 0..n {
        let f = fleet_at(urls.to_vec(), &format!("{tag}#{i}")).await;
        let row: Vec<Breaker> = names.iter().map(|n| member(n, 300)).collect();
        for b in &row {
            f.join(b);
        }
        fleets.push(f);
        members.push(row);
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // the joins' SSUBSCRIBEs
    (fleets, members)
}

/// Each name trips in one instance and opens everywhere, and one probe closes it again;
/// then name `manual` is forced open fleet-wide by the first instance and reset by the last.
async fn spread_probe_and_control(
    fleets: &[Fleet],
    members: &[Vec<Breaker>],
    names: &[&str],
    manual: usize,
) {
    for (j, name) in names.iter().enumerate() {
        trip(&members[j % members.len()][j]);
        wait_for(&format!("{name} open everywhere"), || {
            members.iter().all(|row| row[j].state() == State::Open)
        })
        .await;
        // One probe for the fleet: every instance calls until its member is closed.
        let mut probes = 0;
        for row in members {
            probes += close_by_calls(&row[j]).await;
        }
        assert_eq!(probes, 1, "{name}: {probes} calls reached the dependency");
    }
    let name = names[manual];
    fleets[0].force_open(name).await.unwrap();
    wait_for(&format!("{name} forced open everywhere"), || {
        members
            .iter()
            .all(|row| row[manual].state() == State::ForcedOpen)
    })
    .await;
    fleets[fleets.len() - 1].reset(name).await.unwrap();
    wait_for(&format!("{name} reset everywhere"), || {
        members
            .iter()
            .all(|row| row[manual].state() == State::Closed)
    })
    .await;
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
    let (fleets, members) = instances(&cluster.urls(), "cluster", 3, &names).await;
    spread_probe_and_control(&fleets, &members, &names, 1).await;
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
        args.extend(redis_server::fleet_acl(true));
        assert_eq!(node.command(&args), "+OK");
    }
    let urls: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("redis://fleet:pw@127.0.0.1:{}/", n.port))
        .collect();
    let names = ["cluster_acl::a", "cluster_acl::b"];
    let (fleets, members) = instances(&urls, "cluster_acl", 2, &names).await;
    spread_probe_and_control(&fleets, &members, &names, 0).await;
    let refused = denied(&cluster);
    assert!(refused.is_empty(), "Redis refused: {refused:#?}");
}

/// Names of the hash slots of the first `slots` names `{tag}:{i}`, `per_slot` names each.
fn names_in_few_slots(tag: &str, slots: usize, per_slot: usize) -> Vec<Vec<String>> {
    use redis::cluster_routing::Slot;
    let slot_of = |name: &str| Slot::for_key(format!("{{t:{name}}}"));
    let mut groups: Vec<(Slot, Vec<String>)> = Vec::new();
    for i in 0.. {
        let name = format!("{tag}:{i}");
        let slot = slot_of(&name);
        let known = groups.len();
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, names)) if names.len() < per_slot => names.push(name),
            Some(_) => {}
            None if known < slots => groups.push((slot, vec![name])),
            None => {}
        }
        if groups.len() == slots && groups.iter().all(|(_, n)| n.len() == per_slot) {
            break;
        }
    }
    groups.into_iter().map(|(_, names)| names).collect()
}

/// The sharded channels with subscribers on the cluster, and how many each has.
fn shard_channels(cluster: &RedisCluster) -> Vec<(String, String)> {
    let mut all = Vec::new();
    for node in cluster.nodes.iter().filter(|n| n.is_master()) {
        for channel in node.strings(&["PUBSUB", "SHARDCHANNELS"]) {
            let numsub = node.strings(&["PUBSUB", "SHARDNUMSUB", &channel]);
            all.push((channel, numsub.get(1).cloned().unwrap_or_default()));
        }
    }
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_share_one_channel_per_hash_slot_on_a_cluster() {
    let cluster = RedisCluster::start();
    // 40 names in 4 hash slots, each name a member in two instances.
    let groups = names_in_few_slots("slots", 4, 10);
    let names: Vec<&str> = groups.iter().flatten().map(String::as_str).collect();
    let (_fleets, members) = instances(&cluster.urls(), "slots", 2, &names).await;
    // One subscription per slot and instance, not per name: 4 channels, 2 subscribers each.
    wait_for("both instances subscribed", || {
        let channels = shard_channels(&cluster);
        channels.len() == 4 && channels.iter().all(|(_, n)| n == "2")
    })
    .await;
    let node = &cluster.nodes[0];
    let slot = |key: &str| node.command(&["CLUSTER", "KEYSLOT", key]);
    for (channel, _) in shard_channels(&cluster) {
        assert!(channel.starts_with("{t:ch:"), "{channel}");
        // Each channel hashes to its names' slot, as Redis computes it, so a name's keys
        // and its message go in one MULTI on one shard.
        assert!(
            groups
                .iter()
                .any(|g| slot(&format!("{{t:{}}}", g[0])) == slot(&channel)),
            "{channel} is in no slot of the names"
        );
    }
    // A message on a shared channel changes only the name it speaks of.
    let (opened, neighbour) = (1, 2); // two names of the first slot
    trip(&members[0][opened]);
    wait_for("the name open in the other instance", || {
        members[1][opened].state() == State::Open
    })
    .await;
    assert_eq!(members[1][neighbour].state(), State::Closed);
    assert_eq!(members[0][neighbour].state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_to_another_master_still_carries_openings() {
    let cluster = RedisCluster::start();
    let name = "moved::tax";
    let (_fleets, members) = instances(&cluster.urls(), "moved", 2, &[name]).await;
    let tag = format!("{{t:{name}}}");
    wait_for("both instances subscribed", || {
        shard_channels(&cluster).iter().any(|(_, n)| n == "2")
    })
    .await;
    let (channel, _) = shard_channels(&cluster).remove(0);
    // Redis unsubscribes every client of a slot's shard channels when the slot leaves its
    // node (the connection stays up); an instance that did not notice would never hear
    // this slot again.
    let (_, to) = cluster.move_slot_of(&tag);
    wait_for("both instances subscribed on the slot's new master", || {
        cluster.nodes[to].strings(&["PUBSUB", "SHARDNUMSUB", &channel])[1] == "2"
    })
    .await;
    trip(&members[0][0]);
    wait_for("the opening heard by the other instance", || {
        members[1][0].state() == State::Open
    })
    .await;
}
