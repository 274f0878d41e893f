//! Fleets at scale, measured: N instances (each its own `Fleet`, connection and task) × K
//! members each, against one `redis-server` this example starts on a free loopback port,
//! then a six-node Redis Cluster. Prints open propagation p50/p99/max, Redis commands per
//! second (idle and during the openings), Redis CPU, memory per member and the worst stall
//! of the current-thread runtime that hosts every fleet, while joining and afterwards.
//!
//! ```text
//! cargo run --release --example fleet_scale --features redis -- N K   # e.g. 5 10000
//! BREAKER_QUICK=1 cargo run --example fleet_scale --features redis    # 2 × 1000, seconds
//! ```
//!
//! Needs `redis-server` and `redis-cli` (Debian: `apt-get install -y redis-server
//! redis-tools`); it starts them with the tests' own helper (tests/support/redis.rs). On the
//! cluster, the commands, CPU and the idle figure are summed over its six nodes. Redis is
//! read (`INFO`) on a blocking thread, never on the runtime being measured.

#[path = "../tests/support/redis.rs"]
#[allow(dead_code)] // the helpers only the tests use
mod redis_server;

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use breaker::{fleet::Fleet, Breaker, Config, State};
use redis_server::{RedisCluster, RedisServer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::var("BREAKER_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (n, k) = match (quick, args.as_slice()) {
        (true, _) => (2, 1_000),
        (false, [n, k, ..]) => (*n, *k),
        _ => (5, 10_000),
    };
    let samples = if quick { 20 } else { 200 };
    for cluster in [false, true] {
        let servers = Arc::new(if cluster {
            Redis::Cluster(RedisCluster::start())
        } else {
            Redis::One(RedisServer::start())
        });
        println!(
            "== {} ==",
            if cluster {
                "a six-node Redis Cluster"
            } else {
                "one redis-server"
            }
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(run(&servers, n, k, samples))?;
    }
    Ok(())
}

async fn run(
    server: &Arc<Redis>,
    n: usize,
    k: usize,
    samples: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let rss_before = rss();
    let worst = Arc::new(Mutex::new(Duration::ZERO));
    // Gaps over 5 ms: a 2-core machine shared with other work also shows the scheduler's
    // 4 ms time slices here, wherever the runtime happens to be.
    let over = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (worst, over, stop) = (worst.clone(), over.clone(), stop.clone());
        tokio::spawn(async move {
            let mut last = Instant::now();
            while !stop.load(SeqCst) {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let gap = last.elapsed().saturating_sub(Duration::from_millis(1));
                if gap > Duration::from_millis(5) {
                    over.fetch_add(1, SeqCst);
                }
                let mut w = worst.lock().unwrap();
                *w = (*w).max(gap);
                last = Instant::now();
            }
        })
    };
    let mut instances = Vec::new();
    let joined = Instant::now();
    for i in 0..n {
        let builder = match &**server {
            Redis::Cluster(c) => Fleet::cluster(c.urls()),
            Redis::One(s) => Fleet::builder(s.url()),
        };
        let fleet = builder.instance(format!("scale-{i}")).connect().await?;
        let mut members = Vec::with_capacity(k);
        for j in 0..k {
            let config = Config::default()
                .threshold(1)
                .cool_off(Duration::from_secs(30));
            let b = Breaker::new(format!("scale/{j}"), config);
            fleet.join(&b);
            members.push(b);
            if j % 64 == 63 {
                // The example's own loop must not be what stalls the runtime.
                tokio::task::yield_now().await;
            }
        }
        instances.push((fleet, members));
    }
    // The joins are absorbed once Redis goes quiet (under 20 commands in a quarter second).
    let quiet = Instant::now() + Duration::from_secs(60);
    loop {
        let before = commands(server).await?;
        tokio::time::sleep(Duration::from_millis(250)).await;
        if commands_since(server, before).await? < 20 || Instant::now() > quiet {
            break;
        }
    }
    let joins_stall = std::mem::take(&mut *worst.lock().unwrap());
    println!(
        "{n} instances × {k} members joined in {:?}; worst stall meanwhile {joins_stall:?}, \
         {} over 5 ms (creating the breakers on the same thread included)",
        joined.elapsed(),
        over.swap(0, SeqCst)
    );
    let members = (n * k) as f64;
    println!(
        "memory per member (process RSS, breaker and fleet): {:.0} bytes",
        (rss().saturating_sub(rss_before)) as f64 / members
    );
    let cpu = cpu(server).await?;
    let calls = commands(server).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = commands_since(server, calls).await? as f64 / 2.0;
    println!(
        "idle: {idle:.1} Redis commands/s ({:.2} per instance), Redis CPU {:.1}%",
        idle / n as f64,
        (self::cpu(server).await? - cpu) / 2.0 * 100.0
    );
    // Openings: member j of instance 0 trips; time until every other instance's twin is open.
    let cpu = self::cpu(server).await?;
    let (calls, started) = (commands(server).await?, Instant::now());
    let mut took = Vec::new();
    for s in 0..samples.min(k) {
        let j = s * (k / samples.min(k)).max(1);
        let t0 = Instant::now();
        let _ = instances[0].1[j].call_sync(|| Err::<(), _>("down"));
        let deadline = t0 + Duration::from_secs(10);
        while !instances[1..]
            .iter()
            .all(|(_, m)| m[j].state() == State::Open)
        {
            if Instant::now() > deadline {
                return Err(format!("opening {j} did not spread within 10 s").into());
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        took.push(t0.elapsed());
    }
    let secs = started.elapsed().as_secs_f64();
    took.sort();
    let q = |p: f64| took[((took.len() - 1) as f64 * p) as usize];
    println!(
        "open propagation over {} openings: p50 {:?}, p99 {:?}, max {:?}",
        took.len(),
        q(0.5),
        q(0.99),
        took[took.len() - 1]
    );
    println!(
        "during openings: {:.0} Redis commands/s, Redis CPU {:.1}%",
        commands_since(server, calls).await? as f64 / secs,
        (self::cpu(server).await? - cpu) / secs * 100.0
    );
    stop.store(true, SeqCst);
    ticker.await?;
    println!(
        "worst stall of the current-thread runtime hosting every fleet, idle and openings: \
         {:?}, {} over 5 ms",
        *worst.lock().unwrap(),
        over.load(SeqCst)
    );
    Ok(())
}

/// The Redis this run measures: one server, or a cluster's six nodes.
enum Redis {
    One(RedisServer),
    Cluster(RedisCluster),
}

impl Redis {
    fn nodes(&self) -> &[RedisServer] {
        match self {
            Redis::One(server) => std::slice::from_ref(server),
            Redis::Cluster(cluster) => &cluster.nodes,
        }
    }
}

/// Commands executed so far over every node, read on a blocking thread (a node busy
/// answering would otherwise stall the measured runtime).
async fn commands(redis: &Arc<Redis>) -> Result<u64, tokio::task::JoinError> {
    let redis = redis.clone();
    tokio::task::spawn_blocking(move || redis.nodes().iter().map(RedisServer::commands).sum()).await
}

/// Commands executed since the reading `before`, less that reading's own `INFO` on each node.
async fn commands_since(redis: &Arc<Redis>, before: u64) -> Result<u64, tokio::task::JoinError> {
    Ok(commands(redis).await? - before - redis.nodes().len() as u64)
}

/// CPU seconds used so far over every node, read on a blocking thread.
async fn cpu(redis: &Arc<Redis>) -> Result<f64, tokio::task::JoinError> {
    let redis = redis.clone();
    tokio::task::spawn_blocking(move || redis.nodes().iter().map(RedisServer::cpu).sum()).await
}

/// Resident set size of this process, bytes (Linux; 0 elsewhere).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}
