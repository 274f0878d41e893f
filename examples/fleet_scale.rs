//! Fleets at scale, measured: N instances (each its own `Fleet`, connection and task) × K
//! members each, against one `redis-server` this example starts on a free loopback port.
//! Prints open propagation p50/p99/max, Redis commands per second (idle and during the
//! openings), Redis CPU, memory per member and the worst stall of the current-thread
//! runtime that hosts every fleet.
//!
//! ```text
//! cargo run --release --example fleet_scale --features redis -- N K   # e.g. 5 10000
//! BREAKER_QUICK=1 cargo run --example fleet_scale --features redis    # 2 × 1000, seconds
//! ```
//!
//! Needs `redis-server` and `redis-cli` (Debian: `apt-get install -y redis-server
//! redis-tools`). On the cluster, the commands, CPU and the idle figure are summed over its
//! six nodes.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering::SeqCst},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use breaker::{fleet::Fleet, Breaker, Config, State};

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
        let servers = if cluster {
            Servers::cluster()?
        } else {
            Servers::one()?
        };
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
    server: &Servers,
    n: usize,
    k: usize,
    samples: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let rss_before = rss();
    let worst = Arc::new(Mutex::new(Duration::ZERO));
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (worst, stop) = (worst.clone(), stop.clone());
        tokio::spawn(async move {
            let mut last = Instant::now();
            while !stop.load(SeqCst) {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let gap = last.elapsed().saturating_sub(Duration::from_millis(1));
                let mut w = worst.lock().unwrap();
                *w = (*w).max(gap);
                last = Instant::now();
            }
        })
    };
    let mut instances = Vec::new();
    let joined = Instant::now();
    for i in 0..n {
        let builder = if server.nodes.len() > 1 {
            Fleet::cluster(server.nodes.iter().map(Server::url))
        } else {
            Fleet::builder(server.nodes[0].url())
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
        let before = server.commands();
        tokio::time::sleep(Duration::from_millis(250)).await;
        if server.commands() - before < 20 || Instant::now() > quiet {
            break;
        }
    }
    let joins_stall = std::mem::take(&mut *worst.lock().unwrap());
    println!(
        "{n} instances × {k} members joined in {:?}; worst stall meanwhile {joins_stall:?} \
         (creating the breakers on the same thread included)",
        joined.elapsed()
    );
    let members = (n * k) as f64;
    println!(
        "memory per member (process RSS, breaker and fleet): {:.0} bytes",
        (rss().saturating_sub(rss_before)) as f64 / members
    );
    let cpu = server.cpu();
    let calls = server.commands();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = (server.commands() - calls) as f64 / 2.0;
    println!(
        "idle: {idle:.1} Redis commands/s ({:.2} per instance), Redis CPU {:.1}%",
        idle / n as f64,
        (server.cpu() - cpu) / 2.0 * 100.0
    );
    // Openings: member j of instance 0 trips; time until every other instance's twin is open.
    let cpu = server.cpu();
    let (calls, started) = (server.commands(), Instant::now());
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
        (server.commands() - calls) as f64 / secs,
        (server.cpu() - cpu) / secs * 100.0
    );
    stop.store(true, SeqCst);
    ticker.await?;
    println!(
        "worst stall of the current-thread runtime hosting every fleet, idle and openings: {:?}",
        *worst.lock().unwrap()
    );
    Ok(())
}

/// Resident set size of this process, bytes (Linux; 0 elsewhere).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The Redis this run measures: one server, or a cluster's nodes.
struct Servers {
    nodes: Vec<Server>,
}

impl Servers {
    fn one() -> Result<Servers, String> {
        Ok(Servers {
            nodes: vec![Server::start(&[])?],
        })
    }

    fn cluster() -> Result<Servers, String> {
        let dir = std::env::temp_dir().join(format!("fleet-scale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let dir = dir.to_str().ok_or("a UTF-8 temporary path")?.to_owned();
        let mut nodes = Vec::new();
        for i in 0..6 {
            let config = format!("nodes-{i}.conf");
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                "1000",
                "--repl-diskless-sync-delay",
                "0",
                "--cluster-config-file",
                &config,
                "--dir",
                &dir,
            ];
            nodes.push(Server::start(&args)?);
        }
        let cli = ["/usr/bin", "/usr/local/bin"]
            .iter()
            .map(|d| std::path::Path::new(d).join("redis-cli"))
            .find(|p| p.is_file())
            .ok_or("redis-cli not found: apt-get install -y redis-tools")?;
        let out = Command::new(cli)
            .arg("--cluster")
            .arg("create")
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli: {e}"))?;
        if !out.status.success() {
            return Err("redis-cli --cluster create failed".into());
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !nodes.iter().all(|n| {
            n.bulk(&["CLUSTER", "INFO"])
                .is_some_and(|i| i.contains("cluster_state:ok"))
        }) {
            if Instant::now() > deadline {
                return Err("the cluster did not become ok within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Servers { nodes })
    }

    /// Commands executed so far, over every node (these INFO queries excluded).
    fn commands(&self) -> u64 {
        self.nodes.iter().map(|n| n.commands() - 1).sum()
    }

    /// CPU seconds used so far, over every node.
    fn cpu(&self) -> f64 {
        self.nodes.iter().map(Server::cpu).sum()
    }
}

/// `redis-server` on a free loopback port, stopped on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(extra: &[&str]) -> Result<Server, String> {
        let binary = ["/usr/bin", "/usr/local/bin", "/usr/sbin"]
            .iter()
            .map(|d| std::path::Path::new(d).join("redis-server"))
            .find(|p| p.is_file())
            .ok_or("redis-server not found: apt-get install -y redis-server")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let child = Command::new(binary)
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting redis-server: {e}"))?;
        let server = Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.info("server").is_none() {
            if Instant::now() > deadline {
                return Err("redis-server did not answer within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(server)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `INFO section`'s text.
    fn info(&self, section: &str) -> Option<String> {
        self.bulk(&["INFO", section])
    }

    /// A command whose answer is a bulk string: its text.
    fn bulk(&self, args: &[&str]) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).ok()?;
        let mut reader = BufReader::new(s);
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let len: usize = header.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut body = vec![0; len];
        reader.read_exact(&mut body).ok()?;
        String::from_utf8(body).ok()
    }

    /// Commands executed so far.
    fn commands(&self) -> u64 {
        self.info("commandstats")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                l.split_once("calls=")?
                    .1
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    }

    /// CPU seconds used so far (user + system).
    fn cpu(&self) -> f64 {
        self.info("cpu")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
            .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
            .sum()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
