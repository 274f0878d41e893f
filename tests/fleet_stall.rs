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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    rt.block_on(async {
        let f = Fleet::builder(server.url())
            .instance("scale::join_stall#0")
            .prefix("t")
            .connect()
            .await
            .expect("connect to the test's redis-server");
        let meter = StallMeter::start();
        const N: usize = 60_000;
        let mut members = Vec::with_capacity(N);
        for i in 0..N {
            let b = Breaker::new(format!("scale::join_stall/{i}"), Config::default());
            f.join(&b);
            members.push(b);
            if i % 64 == 63 {
                tokio::task::yield_now().await;
            }
        }
        // Every join taken in: an opening of the last member, published after them, applied.
        let last = format!("scale::join_stall/{}", N - 1);
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
        let worst = meter.stop().await;
        println!("worst stall while {N} members joined: {worst:?}");
        assert!(worst < Duration::from_millis(60), "stalled {worst:?}");
    });
}
