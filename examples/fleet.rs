//! # fleet: five instances in front of one dependency, alone and as a fleet
//!
//! Five instances of a service (five `Fleet`s with distinct instance ids, in one process)
//! call one loopback dependency, each through its own breaker (3 consecutive failures open
//! it). The dependency goes down, then comes back. The same story runs twice:
//!
//! - **local breakers**: each instance learns on its own. Every one of them sends its own
//!   three failures, and every one of them probes after each cool-off while the dependency is
//!   down, and again when it is back;
//! - **fleet**: the first instance to open opens the other four through Redis; when the
//!   open period ends, one instance probes for all, and its result closes or reopens all.
//!
//! Then the quorum: the dependency is fine, but instance `i0`'s path to it is broken (every
//! call of `i0` fails). With `quorum(1)` its opening takes the four healthy instances down;
//! with `quorum(2)` they keep serving.
//!
//! ```text
//! cargo run --example fleet --features redis                          # ~25 s
//! BREAKER_QUICK=1 cargo run --example fleet --features redis          # a few seconds
//! cargo run --example fleet --features redis -- --redis redis://127.0.0.1:6379/
//! ```
//!
//! Without `--redis` it starts `redis-server` itself on a free loopback port (Debian:
//! `apt-get install -y redis-server`) and stops it at the end.

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = rt.block_on(story::run()) {
        eprintln!("fleet example: {e}");
        std::process::exit(1);
    }
}

mod story {
    use std::{
        io::{BufRead, BufReader, Write},
        net::TcpStream as StdTcpStream,
        process::{Child, Command, Stdio},
        sync::{
            atomic::{AtomicBool, AtomicU32, Ordering::SeqCst},
            Arc,
        },
        time::Duration,
    };

    use breaker::{fleet::Fleet, Breaker, Config, State};
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::{TcpListener, TcpStream},
        time::{sleep, timeout, Instant},
    };

    const INSTANCES: usize = 5;

    struct Timing {
        healthy: Duration,
        down: Duration,
        cool_off: Duration,
        /// Between two requests of one instance.
        every: Duration,
    }

    pub async fn run() -> Result<(), String> {
        let quick = std::env::var("BREAKER_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let timing = if quick {
            Timing {
                healthy: Duration::from_millis(300),
                down: Duration::from_millis(1_600),
                cool_off: Duration::from_millis(400),
                every: Duration::from_millis(10),
            }
        } else {
            Timing {
                healthy: Duration::from_secs(1),
                down: Duration::from_secs(8),
                cool_off: Duration::from_secs(1),
                every: Duration::from_millis(10),
            }
        };
        let args: Vec<String> = std::env::args().collect();
        let given = args
            .iter()
            .position(|a| a == "--redis")
            .map(|i| args.get(i + 1).cloned().ok_or("--redis needs a URL"))
            .transpose()?;
        let _server; // stopped on drop
        let url = match given {
            Some(url) => url,
            None => {
                let server = RedisServer::start()?;
                let url = server.url();
                _server = server;
                url
            }
        };
        let dependency = Dependency::start().await;
        println!(
            "{INSTANCES} instances, one loopback dependency down for {:?}, breakers open after 3 \
             failures for {:?}; Redis at {url}\n",
            timing.down, timing.cool_off
        );
        let local = incident(&url, &dependency, &timing, None).await?;
        let fleet = incident(&url, &dependency, &timing, Some("outage")).await?;
        println!("                      reached the dependency   probes while   probes after");
        println!("                      while it was down        it was down    it came back");
        for (label, r) in [("local breakers", local), ("fleet (quorum 1)", fleet)] {
            println!(
                "  {label:<20}{:>12}{:>22}{:>15}",
                r.reached_while_down, r.probes_while_down, r.probes_after
            );
        }
        println!(
            "\nquorum: the dependency is fine, but instance i0's path to it is broken (its calls \
             all fail)"
        );
        for quorum in [1, 2] {
            let r = broken_path(&url, &dependency, &timing, quorum).await?;
            println!(
                "  quorum({quorum}): the 4 healthy instances served {} requests and refused {}{}",
                r.served,
                r.refused,
                if r.refused > 0 {
                    " (i0 opened them)"
                } else {
                    ""
                }
            );
        }
        Ok(())
    }

    /// The loopback dependency: answers `Y` when up, `N` when down, and counts.
    struct Dependency {
        port: u16,
        up: Arc<AtomicBool>,
        reached_while_down: Arc<AtomicU32>,
    }

    impl Dependency {
        async fn start() -> Dependency {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind loopback");
            let port = listener.local_addr().unwrap().port();
            let up = Arc::new(AtomicBool::new(true));
            let reached_while_down = Arc::new(AtomicU32::new(0));
            let (u, r) = (up.clone(), reached_while_down.clone());
            tokio::spawn(async move {
                while let Ok((mut socket, _)) = listener.accept().await {
                    let (u, r) = (u.clone(), r.clone());
                    tokio::spawn(async move {
                        let mut byte = [0u8; 1];
                        if socket.read_exact(&mut byte).await.is_err() {
                            return;
                        }
                        let answer = if u.load(SeqCst) {
                            b"Y"
                        } else {
                            r.fetch_add(1, SeqCst);
                            b"N"
                        };
                        let _ = socket.write_all(answer).await;
                    });
                }
            });
            Dependency {
                port,
                up,
                reached_while_down,
            }
        }
    }

    /// One request; `port` is where this instance believes the dependency is.
    async fn request(port: u16) -> Result<(), &'static str> {
        let exchange = async {
            let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
            s.write_all(b"?").await.ok()?;
            let mut answer = [0u8; 1];
            s.read_exact(&mut answer).await.ok()?;
            Some(answer[0] == b'Y')
        };
        match timeout(Duration::from_millis(200), exchange).await {
            Ok(Some(true)) => Ok(()),
            _ => Err("dependency failed"),
        }
    }

    #[derive(Default)]
    struct Incident {
        reached_while_down: u32,
        probes_while_down: u32,
        probes_after: u32,
    }

    /// Five instances through one outage; `prefix` = Some: as a fleet.
    async fn incident(
        url: &str,
        dependency: &Dependency,
        timing: &Timing,
        prefix: Option<&str>,
    ) -> Result<Incident, String> {
        let name = format!("dependency::{}", prefix.unwrap_or("local"));
        let config = Config::default().threshold(3).cool_off(timing.cool_off);
        let mut breakers = Vec::new();
        let mut fleets = Vec::new();
        for i in 0..INSTANCES {
            let b = Breaker::new(&name, config.clone());
            if let Some(prefix) = prefix {
                let fleet = Fleet::builder(url)
                    .instance(format!("i{i}"))
                    .prefix(prefix)
                    .connect()
                    .await
                    .map_err(|e| e.to_string())?;
                fleet.join(&b);
                fleets.push(fleet);
            }
            breakers.push(b);
        }
        sleep(Duration::from_millis(100)).await; // the joins reach the fleets' tasks
        let down = Arc::new(AtomicBool::new(false));
        let back = Arc::new(AtomicBool::new(false));
        let probes_down = Arc::new(AtomicU32::new(0));
        let probes_after = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for b in &breakers {
            let (b, port) = (b.clone(), dependency.port);
            let (down, back, stop) = (down.clone(), back.clone(), stop.clone());
            let (probes_down, probes_after) = (probes_down.clone(), probes_after.clone());
            let every = timing.every;
            workers.push(tokio::spawn(async move {
                while !stop.load(SeqCst) {
                    let handle = b.handle();
                    let call = b.call(async {
                        // Admitted while half-open: this request is a probe.
                        if handle.peek_state() == State::HalfOpen {
                            if back.load(SeqCst) {
                                probes_after.fetch_add(1, SeqCst);
                            } else if down.load(SeqCst) {
                                probes_down.fetch_add(1, SeqCst);
                            }
                        }
                        request(port).await
                    });
                    let _ = call.await;
                    sleep(every).await;
                }
            }));
        }
        sleep(timing.healthy).await;
        let before = dependency.reached_while_down.load(SeqCst);
        down.store(true, SeqCst);
        dependency.up.store(false, SeqCst);
        sleep(timing.down).await;
        back.store(true, SeqCst);
        dependency.up.store(true, SeqCst);
        let reached = dependency.reached_while_down.load(SeqCst) - before;
        let deadline = Instant::now() + Duration::from_secs(10);
        while breakers
            .iter()
            .any(|b| b.handle().peek_state() != State::Closed)
            && Instant::now() < deadline
        {
            sleep(Duration::from_millis(5)).await;
        }
        stop.store(true, SeqCst);
        for w in workers {
            let _ = w.await;
        }
        Ok(Incident {
            reached_while_down: reached,
            probes_while_down: probes_down.load(SeqCst),
            probes_after: probes_after.load(SeqCst),
        })
    }

    struct Served {
        served: u32,
        refused: u32,
    }

    /// The dependency is up; instance 0 cannot reach it. What the other four serve.
    async fn broken_path(
        url: &str,
        dependency: &Dependency,
        timing: &Timing,
        quorum: u32,
    ) -> Result<Served, String> {
        let name = format!("dependency::quorum{quorum}");
        let prefix = format!("quorum{quorum}");
        let config = Config::default().threshold(3).cool_off(timing.cool_off);
        let mut members = Vec::new();
        for i in 0..INSTANCES {
            let fleet = Fleet::builder(url)
                .instance(format!("i{i}"))
                .prefix(&prefix)
                .quorum(quorum)
                .connect()
                .await
                .map_err(|e| e.to_string())?;
            let b = Breaker::new(&name, config.clone());
            fleet.join(&b);
            members.push((fleet, b));
        }
        sleep(Duration::from_millis(100)).await;
        // A closed port: instance 0's broken path.
        let nowhere = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            l.local_addr().unwrap().port()
        };
        let served = Arc::new(AtomicU32::new(0));
        let refused = Arc::new(AtomicU32::new(0));
        let until = Instant::now() + timing.healthy + timing.cool_off * 2;
        let mut workers = Vec::new();
        for (i, (_, b)) in members.iter().enumerate() {
            let b = b.clone();
            let port = if i == 0 { nowhere } else { dependency.port };
            let (served, refused) = (served.clone(), refused.clone());
            let every = timing.every;
            workers.push(tokio::spawn(async move {
                while Instant::now() < until {
                    let r = b.call(request(port)).await;
                    if i > 0 {
                        match r {
                            Ok(()) => served.fetch_add(1, SeqCst),
                            Err(_) => refused.fetch_add(1, SeqCst),
                        };
                    }
                    sleep(every).await;
                }
            }));
        }
        for w in workers {
            let _ = w.await;
        }
        Ok(Served {
            served: served.load(SeqCst),
            refused: refused.load(SeqCst),
        })
    }

    /// `redis-server` on a free loopback port, stopped on drop.
    struct RedisServer {
        child: Child,
        port: u16,
    }

    impl RedisServer {
        fn start() -> Result<RedisServer, String> {
            let binary = ["/usr/bin", "/usr/local/bin", "/usr/sbin"]
                .iter()
                .map(|d| std::path::Path::new(d).join("redis-server"))
                .find(|p| p.is_file())
                .ok_or(
                    "redis-server not found: install it (apt-get install -y redis-server) or \
                     pass --redis URL",
                )?;
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
            let server = RedisServer { child, port };
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !server.pings() {
                if std::time::Instant::now() > deadline {
                    return Err("redis-server did not answer PING within 10 s".into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(server)
        }

        fn pings(&self) -> bool {
            let Ok(mut s) = StdTcpStream::connect(("127.0.0.1", self.port)) else {
                return false;
            };
            let mut line = String::new();
            s.write_all(b"PING\r\n").is_ok()
                && BufReader::new(s).read_line(&mut line).is_ok()
                && line.starts_with("+PONG")
        }

        fn url(&self) -> String {
            format!("redis://127.0.0.1:{}/", self.port)
        }
    }

    impl Drop for RedisServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
