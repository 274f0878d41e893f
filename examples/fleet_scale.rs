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
//! One node only: the Redis Cluster client (`Fleet::cluster`) is not built yet.

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
    let server = Server::start()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(&server, n, k, samples))
}

async fn run(
    server: &Server,
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
        let fleet = Fleet::builder(server.url())
            .instance(format!("scale-{i}"))
            .connect()
            .await?;
        let members: Vec<Breaker> = (0..k)
            .map(|j| {
                let config = Config::default()
                    .threshold(1)
                    .cool_off(Duration::from_secs(30));
                let b = Breaker::new(format!("scale/{j}"), config);
                fleet.join(&b);
                b
            })
            .collect();
        instances.push((fleet, members));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "{n} instances × {k} members joined in {:?}",
        joined.elapsed()
    );
    let members = (n * k) as f64;
    println!(
        "memory per member (process RSS, breaker and fleet): {:.0} bytes",
        (rss().saturating_sub(rss_before)) as f64 / members
    );
    let (calls, cpu) = (server.commands(), server.cpu());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = (server.commands() - calls - 1) as f64 / 2.0;
    println!(
        "idle: {idle:.1} Redis commands/s ({:.2} per instance), Redis CPU {:.1}%",
        idle / n as f64,
        (server.cpu() - cpu) / 2.0 * 100.0
    );
    // Openings: member j of instance 0 trips; time until every other instance's twin is open.
    let (calls, cpu, started) = (server.commands(), server.cpu(), Instant::now());
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
        "worst stall of the current-thread runtime hosting every fleet: {:?}",
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

/// `redis-server` on a free loopback port, stopped on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start() -> Result<Server, String> {
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
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let req = format!("*2\r\n$4\r\nINFO\r\n${}\r\n{section}\r\n", section.len());
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
