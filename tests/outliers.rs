//! Outlier ejection (`Config::outliers`): endpoints judged against their peers, ejected
//! for a growing time, never a cascade. Paused time, deterministic failure patterns: each
//! second every endpoint gets its calls, call `i` of endpoint `e` failing by a fixed rule.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use breaker::{Breaker, Cause, Config, KeyedBreaker, Outliers, State};

#[cfg(feature = "reqwest")]
#[path = "support/http.rs"]
mod http_server;

#[cfg(feature = "redis")]
#[path = "support/redis.rs"]
#[allow(dead_code)]
mod redis_server;

const SEC: Duration = Duration::from_secs(1);

/// A transition as the hook saw it: key, state entered, cause, cool-off, seconds since start.
type Seen = (String, State, Cause, Option<Duration>, f64);

/// A pool of endpoints behind one keyed breaker, with their transitions recorded.
struct Pool {
    endpoints: KeyedBreaker<String>,
    log: Arc<Mutex<Vec<Seen>>>,
    start: tokio::time::Instant,
    /// Calls made to each endpoint so far (its pattern's index).
    made: Vec<u64>,
    /// Endpoints nobody calls for now.
    silent: Vec<bool>,
}

fn key(e: usize) -> String {
    format!("10.0.0.{e}:80")
}

/// Fails 8 % of calls, never five in a row (the per-key breaker's own rule stays quiet).
fn eight_percent(i: u64) -> bool {
    i % 25 < 2
}

/// Fails 0.1 % of calls.
fn a_tenth_percent(i: u64) -> bool {
    i % 1000 == 999
}

impl Pool {
    fn new(name: &str, n: usize, config: Config) -> Pool {
        let log = Arc::new(Mutex::new(Vec::new()));
        let start = tokio::time::Instant::now();
        let hook = log.clone();
        let prefix = format!("{name}[");
        let config = config.on_state_change(move |t| {
            let key = t
                .name
                .as_str()
                .trim_start_matches(&prefix)
                .trim_end_matches(']');
            let at = start.elapsed().as_secs_f64();
            hook.lock()
                .unwrap()
                .push((key.to_owned(), t.to, t.cause, t.cool_off, at));
        });
        Pool {
            endpoints: KeyedBreaker::new(name, config),
            log,
            start,
            made: vec![0; n],
            silent: vec![false; n],
        }
    }

    /// One second: `per_key` calls to each endpoint, failing by `fails(endpoint, i)`; then
    /// the clock moves on a second (calls happen at x.5 s, the detector ticks on whole ones).
    async fn second(&mut self, per_key: u64, fails: impl Fn(usize, u64) -> bool) {
        if self.start.elapsed() < SEC / 2 {
            tokio::time::sleep(SEC / 2).await;
        }
        for e in 0..self.made.len() {
            if self.silent[e] {
                continue;
            }
            for _ in 0..per_key {
                let i = self.made[e];
                let failed = fails(e, i);
                // Only calls that reach the endpoint move its pattern on.
                let _ = self.endpoints.call_sync(&key(e), || {
                    self.made[e] += 1;
                    if failed {
                        Err("502")
                    } else {
                        Ok(())
                    }
                });
            }
        }
        tokio::time::sleep(SEC).await;
    }

    async fn run(&mut self, seconds: u64, per_key: u64, fails: impl Fn(usize, u64) -> bool) {
        for _ in 0..seconds {
            self.second(per_key, &fails).await;
        }
    }

    /// Outlier ejections so far: (key, cool-off, when).
    fn ejections(&self) -> Vec<(String, Duration, f64)> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, to, cause, ..)| {
                *to == State::Open && matches!(cause, Cause::Outlier { .. })
            })
            .map(|(k, _, _, cool_off, at)| (k.clone(), cool_off.unwrap(), *at))
            .collect()
    }

    fn openings(&self) -> Vec<Seen> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, to, ..)| *to == State::Open)
            .cloned()
            .collect()
    }

    fn not_closed(&self) -> usize {
        (0..self.made.len())
            .filter(|&e| self.endpoints.breaker(&key(e)).state() != State::Closed)
            .count()
    }
}

fn within(d: Duration, low_secs: u64) -> bool {
    let low = Duration::from_secs(low_secs);
    d >= low && d <= low + low / 10
}

#[tokio::test(start_paused = true)]
async fn one_endpoint_at_8_percent_among_twenty_is_ejected_within_two_intervals_and_no_other() {
    let config = Config::default().outliers(Outliers::default());
    let mut f = Pool::new("outliers::one", 20, config);
    f.run(20, 100, |e, i| {
        if e == 7 {
            eight_percent(i)
        } else {
            a_tenth_percent(i)
        }
    })
    .await;
    let ejections = f.ejections();
    assert_eq!(ejections.len(), 1, "{ejections:?}");
    let (k, cool_off, at) = &ejections[0];
    assert_eq!(k, &key(7));
    assert!(*at <= 20.0, "ejected at {at} s");
    assert!(within(*cool_off, 30), "{cool_off:?}");
    assert_eq!(f.openings().len(), 1, "no other key opened");
    assert_eq!(f.endpoints.breaker(&key(7)).state(), State::Open);
    let refused = f.endpoints.call_sync(&key(7), || Ok::<_, ()>(()));
    assert!(refused.unwrap_err().is_open());
}

#[tokio::test(start_paused = true)]
async fn three_degraded_of_twenty_never_more_than_two_ejected() {
    let config = Config::default().outliers(Outliers::default());
    let mut f = Pool::new("outliers::three", 20, config);
    for _ in 0..180 {
        f.second(100, |e, i| {
            if [3, 9, 15].contains(&e) {
                eight_percent(i)
            } else {
                a_tenth_percent(i)
            }
        })
        .await;
        assert!(f.not_closed() <= 2, "at most 10 % of 20 out at once");
    }
    let ejections = f.ejections();
    assert!(ejections.len() >= 2, "{ejections:?}");
    assert!(ejections
        .iter()
        .all(|(k, ..)| [key(3), key(9), key(15)].contains(k)));
    // The first two together; the third only once one of them is back.
    assert_eq!(ejections[0].2, ejections[1].2);
}

#[tokio::test(start_paused = true)]
async fn all_twenty_failing_is_no_outlier_the_breakers_open_on_their_own() {
    let config = Config::default().outliers(Outliers::default());
    let mut f = Pool::new("outliers::all", 20, config);
    f.run(60, 100, |_, _| true).await;
    let openings = f.openings();
    assert!(openings.len() >= 20, "each opened on its own");
    assert!(
        openings
            .iter()
            .all(|(_, _, cause, ..)| !matches!(cause, Cause::Outlier { .. })),
        "{openings:?}"
    );
}

/// Twelve of twenty fail outright (their own breakers open); among the eight left one is
/// at 8 %: with fewer than half the keys admitting, it is not ejected.
#[tokio::test(start_paused = true)]
async fn nothing_new_is_ejected_while_fewer_than_half_admit() {
    let outliers = Outliers::default()
        .max_ejection_percent(100)
        .minimum_hosts(3);
    let mut f = Pool::new("outliers::half", 20, Config::default().outliers(outliers));
    let fails = |e: usize, i: u64| match e {
        0..12 => true,
        12 => eight_percent(i),
        _ => a_tenth_percent(i),
    };
    f.run(60, 100, fails).await;
    assert!(f.ejections().is_empty(), "{:?}", f.ejections());
    // The same eight alone are judged: the 8 % one goes.
    let outliers = Outliers::default()
        .max_ejection_percent(100)
        .minimum_hosts(3);
    let mut g = Pool::new(
        "outliers::half_control",
        8,
        Config::default().outliers(outliers),
    );
    g.run(20, 100, |e, i| fails(e + 12, i)).await;
    let ejected: Vec<_> = g.ejections().into_iter().map(|(k, ..)| k).collect();
    assert_eq!(ejected, [key(0)]);
}

#[tokio::test(start_paused = true)]
async fn under_minimum_hosts_or_request_volume_nothing_happens() {
    let outliers = Outliers::default().max_ejection_percent(100);
    // Four endpoints, one failing half its calls (alternately: no streak of five).
    let mut f = Pool::new("outliers::hosts", 4, Config::default().outliers(outliers));
    f.run(40, 100, |e, i| e == 0 && i % 2 == 0).await;
    assert!(f.openings().is_empty(), "{:?}", f.openings());
    // Twenty, with 99 calls an interval each (9.9 a second: 10, then 9 every tenth second).
    let mut f = Pool::new("outliers::volume", 20, Config::default().outliers(outliers));
    for s in 0..40u64 {
        let per_key = if s % 10 == 9 { 9 } else { 10 };
        f.second(per_key, |e, i| e == 0 && i % 2 == 0).await;
    }
    assert!(f.openings().is_empty(), "{:?}", f.openings());
    // At 100 an interval it is judged, and goes.
    f.run(20, 10, |e, i| e == 0 && i % 2 == 0).await;
    let ejected: Vec<_> = f.ejections().into_iter().map(|(k, ..)| k).collect();
    assert_eq!(ejected, [key(0)]);
}

/// base 30 s, max 60 s: the first ejection 30 s, the second 60 s, the third capped at 60 s
/// (each plus up to 10 %); healthy for two intervals, the key's count falls back to zero
/// and its next ejection is 30 s again.
#[tokio::test(start_paused = true)]
async fn the_second_ejection_lasts_twice_the_first_and_the_time_caps_at_the_maximum() {
    let outliers = Outliers::default().max_ejection_time(Duration::from_secs(60));
    let mut f = Pool::new("outliers::growth", 20, Config::default().outliers(outliers));
    let bad = |e: usize, i: u64| {
        if e == 7 {
            eight_percent(i)
        } else {
            a_tenth_percent(i)
        }
    };
    while f.ejections().len() < 3 {
        f.second(100, bad).await;
        assert!(f.start.elapsed() < Duration::from_secs(300));
    }
    let times: Vec<Duration> = f.ejections().iter().map(|(_, d, _)| *d).collect();
    assert!(within(times[0], 30), "{times:?}");
    assert!(within(times[1], 60), "{times:?}");
    assert!(within(times[2], 60), "{times:?}");
    // Healthy from now (and better than its peers: a key one failure worse than peers that
    // agree to the call is below their mean − 1.9 σ, as in Envoy). Once back, three
    // intervals take n from 3 to 0.
    let healthy = |e: usize, i: u64| e != 7 && a_tenth_percent(i);
    while f.endpoints.breaker(&key(7)).state() != State::Closed {
        f.second(100, healthy).await;
    }
    f.run(30, 100, healthy).await;
    assert_eq!(f.ejections().len(), 3);
    while f.ejections().len() < 4 {
        f.second(100, bad).await;
    }
    let last = f.ejections()[3].1;
    assert!(within(last, 30), "{last:?}");
}

#[tokio::test(start_paused = true)]
async fn jitter_spreads_the_returns() {
    let outliers = Outliers::default().max_ejection_percent(20);
    let mut f = Pool::new("outliers::jitter", 20, Config::default().outliers(outliers));
    let bad = [2, 5, 11, 17];
    f.run(20, 100, |e, i| {
        if bad.contains(&e) {
            eight_percent(i)
        } else {
            a_tenth_percent(i)
        }
    })
    .await;
    let ejections = f.ejections();
    assert_eq!(ejections.len(), 4, "{ejections:?}");
    let mut times: Vec<Duration> = ejections.iter().map(|(_, d, _)| *d).collect();
    assert!(times.iter().all(|d| within(*d, 30)), "{times:?}");
    times.sort();
    times.dedup();
    assert_eq!(times.len(), 4, "each returns at its own time: {times:?}");
}

/// Keys idle in the map (called once, long ago) are no peers: they neither count in the
/// statistics nor widen the cap, which stays 10 % of the twenty in use, not of 220.
#[tokio::test(start_paused = true)]
async fn idle_keys_leave_the_statistics_and_do_not_widen_the_cap() {
    let config = Config::default().outliers(Outliers::default());
    let mut f = Pool::new("outliers::idle", 20, config);
    for i in 0..200 {
        let _ = f
            .endpoints
            .call_sync(&format!("idle-{i}"), || Ok::<_, ()>(()));
    }
    // An interval with their calls, then they are idle.
    tokio::time::sleep(Duration::from_millis(20_500)).await;
    assert_eq!(f.endpoints.len(), 200);
    let bad = [3, 9, 15, 16];
    for _ in 0..60 {
        f.second(100, |e, i| {
            if bad.contains(&e) {
                eight_percent(i)
            } else {
                a_tenth_percent(i)
            }
        })
        .await;
        assert!(f.not_closed() <= 2, "10 % of the 20 in use");
    }
    assert!(f.ejections().len() >= 2);
}

/// A key evicted from the map leaves the detector with it: made again, its next
/// ejection is a first one (30 s), where the same key kept would have had its second (60 s).
#[tokio::test(start_paused = true)]
async fn a_key_evicted_from_the_map_is_forgotten() {
    for evict in [false, true] {
        let config = Config::default()
            .outliers(Outliers::default())
            .idle(Duration::from_secs(60));
        let mut f = Pool::new("outliers::evicted", 20, config);
        let bad = |e: usize, i: u64| {
            if e == 7 {
                eight_percent(i)
            } else {
                a_tenth_percent(i)
            }
        };
        f.run(20, 100, bad).await;
        assert_eq!(f.ejections().len(), 1);
        // Nobody calls endpoint 7 for two minutes: open, then half-open, unused, it is
        // swept as idle; kept, it is still the ejected key it was.
        // (A sweep stamps the keys called since the last one, the next drops the idle.)
        f.silent[7] = true;
        for _ in 0..2 {
            f.run(61, 100, |_, i| a_tenth_percent(i)).await;
            if evict {
                f.endpoints.retain_active();
            }
        }
        assert_eq!(f.endpoints.contains(&key(7)), !evict);
        f.silent[7] = false;
        while f.ejections().len() < 2 {
            f.second(100, bad).await;
        }
        let second = f.ejections()[1].1;
        let expected = if evict { 30 } else { 60 };
        assert!(within(second, expected), "evicted {evict}: {second:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_detector_task_stops_with_the_keyed_breaker() {
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    assert_eq!(tasks(), 0);
    let plain = KeyedBreaker::<String>::new("outliers::no_task", Config::default());
    assert_eq!(tasks(), 0, "no outliers, no task");
    let endpoints = KeyedBreaker::<String>::new(
        "outliers::task",
        Config::default().outliers(Outliers::default()),
    );
    let clone = endpoints.clone();
    assert_eq!(tasks(), 1);
    let _ = clone.call_sync("a", || Ok::<_, ()>(()));
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(tasks(), 1, "one task, whatever the keys and intervals");
    drop(endpoints);
    drop(clone);
    tokio::task::yield_now().await;
    assert_eq!(tasks(), 0, "stopped with its keyed breaker");
    drop(plain);
}

/// `reconfigure` turns outliers off (the task stands down) and on again.
#[tokio::test(start_paused = true)]
async fn reconfigure_turns_outliers_off_and_on() {
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let mut f = Pool::new("outliers::reconfigure", 20, Config::default());
    let bad = |e: usize, i: u64| {
        if e == 7 {
            eight_percent(i)
        } else {
            a_tenth_percent(i)
        }
    };
    f.run(30, 100, bad).await;
    assert!(f.ejections().is_empty());
    assert_eq!(tasks(), 0);
    f.endpoints
        .reconfigure(Config::default().outliers(Outliers::default()))
        .unwrap();
    assert_eq!(tasks(), 1);
    // Its first walk takes readings; the next judges.
    f.run(21, 100, bad).await;
    assert_eq!(f.ejections().len(), 1);
    f.endpoints.reconfigure(Config::default()).unwrap();
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(tasks(), 0, "stood down");
}

#[test]
fn outliers_are_for_keyed_breakers_and_each_field_is_checked() {
    let config = Config::default().outliers(Outliers::default());
    assert_eq!(
        Breaker::try_new("outliers::plain", config.clone())
            .unwrap_err()
            .field(),
        "outliers"
    );
    let plain = Breaker::new("outliers::plain_reconfigure", Config::default());
    assert_eq!(plain.reconfigure(config).unwrap_err().field(), "outliers");
    let o = Outliers::default();
    for (bad, field) in [
        (o.interval(Duration::ZERO), "interval"),
        (o.request_volume(0), "request_volume"),
        (o.minimum_hosts(0), "minimum_hosts"),
        (o.stdev_factor(f64::NAN), "stdev_factor"),
        (o.stdev_factor(-1.0), "stdev_factor"),
        (o.failure_percentage(0), "failure_percentage"),
        (o.failure_percentage(101), "failure_percentage"),
        (o.base_ejection_time(Duration::ZERO), "base_ejection_time"),
        (
            o.max_ejection_time(Duration::from_secs(29)),
            "max_ejection_time",
        ),
        (o.max_ejection_percent(0), "max_ejection_percent"),
        (o.max_ejection_percent(101), "max_ejection_percent"),
    ] {
        let err = KeyedBreaker::<String>::try_new("outliers::bad", Config::default().outliers(bad))
            .unwrap_err();
        assert_eq!(err.field(), field);
    }
    assert_eq!(Outliers::default(), Outliers::DEFAULT);
    let named = Config::default().outliers(Outliers::default().interval(Duration::from_secs(5)));
    assert_ne!(named, Config::default().outliers(Outliers::default()));
}

/// The WARN lines of target `breaker` (the test's own thread's: the detector task runs on
/// it, the runtime being the current thread's).
#[path = "support/logs.rs"]
mod logs;

#[tokio::test(start_paused = true)]
async fn a_dry_run_ejects_nothing_and_says_would_eject() {
    let warnings = logs::Logs::new(tracing::Level::WARN, "breaker");
    let _default = tracing::subscriber::set_default(warnings.clone());
    let config = Config::default()
        .outliers(Outliers::default())
        .dry_run(true);
    let mut f = Pool::new("outliers::dry", 20, config);
    let bad = |e: usize, i: u64| {
        if e == 7 {
            eight_percent(i)
        } else {
            a_tenth_percent(i)
        }
    };
    f.run(20, 100, bad).await;
    assert!(f.log.lock().unwrap().is_empty(), "no transition at all");
    assert_eq!(f.endpoints.breaker(&key(7)).state(), State::Closed);
    let said = warnings.messages();
    assert_eq!(said.len(), 2, "one a tick: {said:?}");
    for s in &said {
        assert!(s.contains("would eject"), "{said:?}");
        assert!(s.contains("outliers::dry[10.0.0.7:80]"), "{said:?}");
    }
}

/// A fleet shares an ejection as it shares any opening: decided on one instance (its
/// peers judged there), it holds on the other for the ejection's time.
#[cfg(feature = "redis")]
mod fleet {
    use std::time::{Duration, Instant};

    use super::redis_server::RedisServer;
    use breaker::{fleet::Fleet, Cause, Config, KeyedBreaker, Outliers, State};

    use super::{a_tenth_percent, eight_percent, key};

    async fn fleet(server: &RedisServer, instance: &str) -> Fleet {
        Fleet::builder(server.url())
            .instance(instance)
            .prefix("outliers")
            .quorum(1)
            .connect()
            .await
            .expect("connect to the test's redis-server")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_ejection_decided_on_one_instance_holds_on_the_other() {
        let server = RedisServer::start();
        let outliers = Outliers::default().interval(Duration::from_millis(200));
        let causes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = causes.clone();
        let on_b_config = Config::default()
            .outliers(outliers)
            .on_state_change(move |t| seen.lock().unwrap().push((t.to, t.cause, t.cool_off)));
        let a = fleet(&server, "outliers::fleet#a").await;
        let b = fleet(&server, "outliers::fleet#b").await;
        let on_a =
            KeyedBreaker::<String>::new("outliers::fleet", Config::default().outliers(outliers));
        let on_b = KeyedBreaker::<String>::new("outliers::fleet", on_b_config);
        a.join_keyed(&on_a);
        b.join_keyed(&on_b);
        let seven_on_b = on_b.breaker(&key(7));
        tokio::time::sleep(Duration::from_millis(100)).await;

        // Instance a's traffic: endpoint 7 at 8 %, its peers at 0.1 %; b gets none.
        let mut made = [0u64; 20];
        let deadline = Instant::now() + Duration::from_secs(20);
        while on_a.breaker(&key(7)).state() == State::Closed {
            assert!(
                Instant::now() < deadline,
                "instance a never ejected endpoint 7"
            );
            for (e, made) in made.iter_mut().enumerate() {
                for _ in 0..60 {
                    let _ = on_a.call_sync(&key(e), || {
                        *made += 1;
                        let fails = if e == 7 {
                            eight_percent(*made)
                        } else {
                            a_tenth_percent(*made)
                        };
                        if fails {
                            Err("502")
                        } else {
                            Ok(())
                        }
                    });
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        while seven_on_b.state() != State::Open {
            assert!(
                Instant::now() < deadline,
                "instance b never heard of the ejection"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let causes = causes.lock().unwrap().clone();
        let (_, cause, cool_off) = causes[0];
        assert_eq!(cause, Cause::Fleet, "{causes:?}");
        let cool_off = cool_off.unwrap();
        assert!(
            cool_off > Duration::from_secs(25),
            "the ejection's time: {cool_off:?}"
        );
        // It holds there: b refuses endpoint 7, and only it.
        assert!(on_b
            .call_sync(&key(7), || Ok::<_, ()>(()))
            .unwrap_err()
            .is_open());
        assert!(on_b.call_sync(&key(8), || Ok::<_, ()>(())).is_ok());
    }
}

/// The reqwest middleware keys by host: its `Config` with outliers judges each host
/// against the others. Ten loopback hosts; one fails a quarter of its requests (never five
/// in a row, so its own breaker stays closed) and is ejected; then refused, and only it.
#[cfg(feature = "reqwest")]
#[tokio::test]
async fn the_reqwest_middleware_ejects_the_outlier_host() {
    use breaker::reqwest::CircuitBreakerMiddleware;
    use std::time::Instant;

    let mut hosts = Vec::new();
    for _ in 0..10 {
        hosts.push(http_server::Server::start().await);
    }
    let outliers = Outliers::default()
        .interval(Duration::from_millis(200))
        .request_volume(10);
    let breakers = CircuitBreakerMiddleware::with_config(Config::default().outliers(outliers));
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(breakers.clone())
        .build();
    let sick = &hosts[0];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0u64;
    while breakers.breaker(&sick.host_port()).state() == State::Closed {
        assert!(
            Instant::now() < deadline,
            "the sick host was never ejected: {:?} {:?} {n}",
            breakers.breaker(&sick.host_port()).stats(),
            breakers.breaker(&hosts[1].host_port()).stats()
        );
        for h in &hosts {
            if std::ptr::eq(h, sick) {
                n += 1;
                sick.answer(if n.is_multiple_of(4) { 500 } else { 200 }, None);
            }
            let _ = client.get(h.url("/")).send().await;
        }
    }
    let refused = client.get(sick.url("/")).send().await;
    assert!(matches!(
        refused,
        Err(reqwest_middleware::Error::Middleware(_))
    ));
    for h in &hosts[1..] {
        assert_eq!(breakers.breaker(&h.host_port()).state(), State::Closed);
        assert_eq!(client.get(h.url("/")).send().await.unwrap().status(), 200);
    }
}
