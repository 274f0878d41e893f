//! A real `redis-server` on a free loopback port, for the fleet tests and
//! `examples/fleet_scale.rs` (which includes this file with `#[path]`): started with no
//! persistence, ready once it answers PING, killed on drop. A missing binary fails with the
//! command that installs it: never a silent skip.

use std::{
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
}

fn binary() -> PathBuf {
    find("redis-server", "redis-server")
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().unwrap().port()
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let mut server = RedisServer {
            child: None,
            port: free_port(),
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let child = Command::new(binary())
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &self.port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        self.await_ping();
    }

    fn await_ping(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(reply) = self.try_command(&["PING"])
                && reply == "+PONG"
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer PING within 10 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (its data goes with it).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// Commands executed so far (`INFO commandstats`): a reading does not count itself,
    /// the next one does.
    pub fn commands(&self) -> u64 {
        self.command_bulk(&["INFO", "commandstats"])
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

    /// CPU seconds used so far, user and system (`INFO cpu`).
    pub fn cpu(&self) -> f64 {
        self.command_bulk(&["INFO", "cpu"])
            .lines()
            .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
            .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
            .sum()
    }

    /// One command, its reply's first line (`+OK`, `:12`, `$5` …).
    pub fn command(&self, args: &[&str]) -> String {
        self.try_command(args)
            .unwrap_or_else(|e| panic!("redis {args:?}: {e}"))
    }

    /// One command whose reply is a bulk string (`INFO`): its text.
    pub fn command_bulk(&self, args: &[&str]) -> String {
        self.try_bulk(args)
            .unwrap_or_else(|| panic!("redis {args:?}: no bulk reply"))
    }

    /// Whether this node runs and is a master (a cluster's replica is not).
    pub fn is_master(&self) -> bool {
        self.child.is_some()
            && self
                .try_bulk(&["INFO", "replication"])
                .is_some_and(|i| i.contains("role:master"))
    }

    fn try_bulk(&self, args: &[&str]) -> Option<String> {
        use std::io::Read;
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        stream.write_all(&request(args)).ok()?;
        let mut reader = BufReader::new(stream);
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let len: usize = header.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut body = vec![0; len];
        reader.read_exact(&mut body).ok()?;
        Some(String::from_utf8_lossy(&body).into_owned())
    }

    /// What this node refused since it started (`ACL LOG`): one line per entry, the
    /// command (`object`), the reason and the user.
    pub fn acl_denials(&self) -> Vec<String> {
        let Resp::Array(entries) = self.reply(&["ACL", "LOG"]) else {
            panic!("ACL LOG: not an array");
        };
        entries
            .into_iter()
            .map(|entry| {
                let Resp::Array(fields) = entry else {
                    return format!("{entry:?}");
                };
                let field = |name: &str| {
                    fields
                        .chunks(2)
                        .find(|kv| matches!(&kv[0], Resp::Text(k) if k == name))
                        .and_then(|kv| kv.get(1))
                        .map_or_else(String::new, |v| format!("{v:?}"))
                };
                format!(
                    "{} refused ({}) for user {}",
                    field("object"),
                    field("reason"),
                    field("username")
                )
            })
            .collect()
    }

    /// One command whose reply is an array of strings or integers (`PUBSUB SHARDNUMSUB`).
    pub fn strings(&self, args: &[&str]) -> Vec<String> {
        let Resp::Array(items) = self.reply(args) else {
            panic!("redis {args:?}: not an array");
        };
        items
            .into_iter()
            .map(|item| match item {
                Resp::Text(text) => text,
                Resp::Int(n) => n.to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// One command's whole reply, however nested.
    fn reply(&self, args: &[&str]) -> Resp {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("a read timeout");
        stream
            .write_all(&request(args))
            .unwrap_or_else(|e| panic!("send {args:?}: {e}"));
        Resp::read(&mut BufReader::new(stream))
    }

    fn try_command(&self, args: &[&str]) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.write_all(&request(args))?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line)?;
        Ok(line.trim_end().to_owned())
    }
}

/// The ACL a fleet with prefix `t` needs, exactly as the README and `breaker::fleet`
/// document it for prefix `breaker`: on one node, or on a cluster, where the slots' sharded
/// channels replace the fleet's channel and the cluster client sends commands of its own
/// (`CLUSTER SLOTS` for the topology, `PING` to check each new connection; `HELLO` and
/// `AUTH` need no permission). Each cluster item was found necessary by taking it out: the
/// client cannot connect without `cluster|slots`, and `ACL LOG` shows `ping` refused without
/// it. `+sadd +srem +smembers +exists` only serve `quorum(n)`, n ≥ 2.
pub fn fleet_acl(cluster: bool) -> Vec<&'static str> {
    let (keys_and_channels, messages): (&[&str], &[&str]) = if cluster {
        (
            &["~{t:*", "&{t:*"],
            &["+spublish", "+ssubscribe", "+cluster|slots"],
        )
    } else {
        (&["~{t:*", "&t:*"], &["+publish", "+subscribe"])
    };
    let commands = [
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
        "+multi",
        "+exec",
    ];
    [keys_and_channels, &commands, messages].concat()
}

/// A RESP2 reply, for the few commands whose answer is nested (`ACL LOG`, `PUBSUB`).
#[derive(Debug)]
enum Resp {
    Text(String),
    Int(i64),
    Nil,
    Array(Vec<Resp>),
}

impl Resp {
    fn read(reader: &mut impl BufRead) -> Resp {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a RESP line");
        let line = line.trim_end();
        let (kind, rest) = line.split_at(1);
        let number = || rest.parse::<i64>().expect("a RESP length");
        match kind {
            "+" | "-" => Resp::Text(rest.to_owned()),
            ":" => Resp::Int(number()),
            "$" if number() < 0 => Resp::Nil,
            "$" => {
                let mut body = vec![0; number() as usize + 2];
                reader.read_exact(&mut body).expect("a bulk string");
                body.truncate(body.len() - 2);
                Resp::Text(String::from_utf8_lossy(&body).into_owned())
            }
            "*" if number() < 0 => Resp::Nil,
            "*" => Resp::Array((0..number()).map(|_| Resp::read(reader)).collect()),
            _ => panic!("not RESP2: {line}"),
        }
    }
}

fn request(args: &[&str]) -> Vec<u8> {
    let mut request = format!("*{}\r\n", args.len());
    for a in args {
        request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    request.into_bytes()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A real Redis Cluster on loopback: six `redis-server --cluster-enabled yes` (three masters,
/// three replicas) joined by `redis-cli --cluster create`, each in its own temporary
/// directory; every node killed on drop. A missing binary fails with how to install it.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
    dir: PathBuf,
}

fn find(name: &str, package: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/bin", "/usr/local/bin", "/usr/sbin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} not found on PATH nor in /usr/bin: the fleet tests need a real one; \
                 install it with `apt-get install -y redis-server redis-tools` ({package})"
            )
        })
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let server = find("redis-server", "redis-server");
        let cli = find("redis-cli", "redis-tools");
        let dir = std::env::temp_dir().join(format!(
            "breaker-cluster-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let port = free_port();
            let child = Command::new(&server)
                .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
                .args(["--port", &port.to_string()])
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
                // Replicas in sync at once: a replica that never synced does not fail over.
                .args(["--repl-diskless-sync-delay", "0"])
                .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
                .args(["--dir", dir.to_str().expect("a UTF-8 temporary path")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server");
            let node = RedisServer {
                child: Some(child),
                port,
            };
            node.await_ping();
            nodes.push(node);
        }
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new(&cli)
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes, dir };
        cluster.await_ok();
        // Every replica in sync with its master (else it could not take over).
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cluster.nodes.iter().all(|n| {
            n.try_bulk(&["INFO", "replication"])
                .is_some_and(|i| i.contains("role:master") || i.contains("master_link_status:up"))
        }) {
            assert!(
                Instant::now() < deadline,
                "replicas did not sync within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        cluster
    }

    /// Waits until every live node says `cluster_state:ok`.
    pub fn await_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                n.try_bulk(&["CLUSTER", "INFO"])
                    .is_some_and(|info| info.contains("cluster_state:ok"))
            });
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not become ok within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Waits until a live node is master of `key`'s slot (after a failover: the replica
    /// promoted), and every live node says `cluster_state:ok`.
    pub fn await_master(&self, key: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.find_master(key).is_none() {
            assert!(
                Instant::now() < deadline,
                "no live master for {key} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.await_ok();
    }

    /// The node that is master of `key`'s slot now.
    pub fn master_of(&mut self, key: &str) -> &mut RedisServer {
        let index = self.find_master(key).expect("a master for the slot");
        &mut self.nodes[index]
    }

    /// Moves `key`'s slot (which must hold no key) from its master to another master, as
    /// `redis-cli --cluster reshard` does: importing, migrating, then the new owner told to
    /// every master. Returns the indices of the old and the new owner.
    pub fn move_slot_of(&self, key: &str) -> (usize, usize) {
        let from = self.find_master(key).expect("a master for the slot");
        let to = (0..self.nodes.len())
            .find(|&i| i != from && self.nodes[i].is_master())
            .expect("another master");
        let slot = self.nodes[from]
            .command(&["CLUSTER", "KEYSLOT", key])
            .trim_start_matches(':')
            .to_owned();
        let id = |i: usize| self.nodes[i].command_bulk(&["CLUSTER", "MYID"]);
        let (from_id, to_id) = (id(from), id(to));
        let ok = |i: usize, args: &[&str]| {
            assert_eq!(self.nodes[i].command(args), "+OK", "{args:?}");
        };
        ok(to, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]);
        ok(from, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]);
        for i in (0..self.nodes.len()).filter(|&i| self.nodes[i].is_master()) {
            ok(i, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
        }
        self.await_master(key);
        (from, to)
    }

    fn find_master(&self, key: &str) -> Option<usize> {
        let live = self.nodes.iter().find(|n| n.child.is_some())?;
        let slot: u64 = live
            .command(&["CLUSTER", "KEYSLOT", key])
            .trim_start_matches(':')
            .parse()
            .expect("a slot");
        self.nodes.iter().position(|n| {
            n.is_master()
                && n.try_bulk(&["CLUSTER", "NODES"]).is_some_and(|nodes| {
                    nodes.lines().any(|l| l.contains("myself") && owns(l, slot))
                })
        })
    }
}

/// Whether a `CLUSTER NODES` line's slot ranges include `slot`.
fn owns(line: &str, slot: u64) -> bool {
    line.split_whitespace().skip(8).any(|range| {
        let mut ends = range.split('-').filter_map(|e| e.parse::<u64>().ok());
        match (ends.next(), ends.next()) {
            (Some(a), Some(b)) => (a..=b).contains(&slot),
            (Some(a), None) => a == slot,
            _ => false,
        }
    })
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
