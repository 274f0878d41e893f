//! The worst stall of a current-thread runtime while a fleet takes in 60 000 joins, against
//! a real `redis-server` (tests/support/redis.rs). Its own test binary: in one process with
//! the other fleet tests, their threads (10 000-breaker tests, loops reading the
//! process-wide registry) kept this runtime's thread waiting for a core or for the
//! registry's lock for over 100 ms, whatever the fleet did.
#![cfg(feature = "redis")]

#[path = "support/redis.rs"]
#[allow(dead_code)] // the cluster's helpers are tests/fleet_cluster.rs's
mod redis_server;
#[path = "support/stall.rs"]
mod stall;

use std::time::{Duration, Instant};

use breaker::{fleet::Fleet, Breaker, Config, State};
use redis_server::RedisServer;
use stall::StallMeter;

/// DESIGN: a current-thread runtime hosting a fleet never stalls, through joins too. 60 000
/// members join (past the 57 344 entries at which a map of 65 536 places doubles: the
/// fleet's map of names took 33–81 ms to grow there in release builds, the registry's
/// index 12–17 ms), made 64 at a time as a service would on its runtime; the ticker measures
/// the longest the runtime's one thread was kept. A generous bound for a debug build on a
/// busy machine (`scripts/test` builds the trybuild cases beside the tests): 87–94 ms
/// before the maps were sharded, 8–10 ms after.
#[test]
fn sixty_thousand_joins_stall_a_current_thread_runtime_very_little() {
    // A stall the fleet causes shows in every attempt; a preemption of this thread by a busy
    // machine (60-85 ms seen at load 6 on 2 cores, with 13 ms in the attempt before) rarely
    // shows three times running. So: the best of at most three attempts, each with its own
    // server, fleet and names.
    let mut best = Duration::MAX;
    for attempt in 0..3 {
        let worst = worst_stall_while_joining(attempt);
        println!("attempt {attempt}: worst stall while {N} members joined: {worst:?}");
        best = best.min(worst);
        if best < BOUND {
            break;
        }
    }
    assert!(best < BOUND, "stalled {best:?} in each of three attempts");
}

const N: usize = 60_000;
const BOUND: Duration = Duration::from_millis(60);

fn worst_stall_while_joining(attempt: usize) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    rt.block_on(async {
        let f = Fleet::builder(server.url())
            .instance(format!("scale::join_stall#{attempt}"))
            .prefix("t")
            .connect()
            .await
            .expect("connect to the test's redis-server");
        let meter = StallMeter::start();
        let mut members = Vec::with_capacity(N);
        for i in 0..N {
            let b = Breaker::new(
                format!("scale::join_stall/{attempt}/{i}"),
                Config::default(),
            );
            f.join(&b);
            members.push(b);
            if i % 64 == 63 {
                tokio::task::yield_now().await;
            }
        }
        // Every join taken in: an opening of the last member, published after them, applied.
        let last = format!("scale::join_stall/{attempt}/{}", N - 1);
        let key = format!("{{t:{last}}}:open");
        assert_eq!(server.command(&["SET", &key, "x", "PX", "60000"]), "+OK");
        let message = format!("breaker-fleet/1 open other 60000 {last}");
        assert!(server
            .command(&["PUBLISH", "t:fleet", &message])
            .starts_with(':'));
        let deadline = Instant::now() + Duration::from_secs(20);
        while members[N - 1].state() != State::Open {
            assert!(Instant::now() < deadline, "the last member never opened");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        meter.stop().await
    })
}
