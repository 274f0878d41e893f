//! A real `redis-server` on a free loopback port, for the fleet tests: started with no
//! persistence, ready once it answers PING, killed on drop. A missing binary fails the test
//! with the command that installs it: never a silent skip.

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
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/bin", "/usr/local/bin", "/usr/sbin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "redis-server not found on PATH nor in /usr/bin: the fleet tests need a real \
                 one; install it with `apt-get install -y redis-server`"
            )
        })
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
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(reply) = self.try_command(&["PING"]) {
                if reply == "+PONG" {
                    return;
                }
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

    /// One command, its reply's first line (`+OK`, `:12`, `$5` …).
    pub fn command(&self, args: &[&str]) -> String {
        self.try_command(args)
            .unwrap_or_else(|e| panic!("redis {args:?}: {e}"))
    }

    /// One command whose reply is a bulk string (`INFO`): its text.
    pub fn command_bulk(&self, args: &[&str]) -> String {
        use std::io::Read;
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(&request(args)).unwrap();
        let mut reader = BufReader::new(stream);
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        let len: usize = header
            .trim_end()
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("redis {args:?}: {header}"));
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        String::from_utf8_lossy(&body).into_owned()
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
