//! Turns the estimates of the last `cargo bench --bench peers` run into the markdown tables of
//! `RESULTS.md`: `cargo run --release --bin report` (from `benches/`). When the same runs
//! also hold `--bench keyed` and `--bench tower_layer` (as `scripts/wall.sh` makes them), their
//! tables follow: the keyed call with its 2-thread ÷ 1-thread ratios, and the tower layers.
//!
//! It reads the median of each benchmark from
//! `target/criterion/<group>/<benchmark>/new/estimates.json`; nothing is estimated here.
//! Given copies of that directory from several runs (`report DIR...`), each figure is the
//! median over the runs: wall time on a shared machine moves from one run to the next.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

const IMPLS: [(&str, &str); 7] = [
    ("breaker", "breaker"),
    ("breaker_attr", "breaker (attribute)"),
    ("failsafe", "failsafe 1.3"),
    ("recloser", "recloser 1.4"),
    ("tower", "tower-circuitbreaker 0.2"),
    ("tower_resilience", "tower-resilience 0.14"),
    ("seatbelt", "seatbelt 0.11"),
];
const PEERS: [&str; 5] = [
    "failsafe",
    "recloser",
    "tower",
    "tower_resilience",
    "seatbelt",
];

/// The median point estimate (ns) in one criterion `estimates.json`.
fn median(path: &Path) -> Option<f64> {
    let text = fs::read_to_string(path).ok()?;
    let at = text.find("\"median\"")?;
    let rest = &text[at..];
    let p = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let num: String = rest[p..]
        .chars()
        .skip_while(|c| c.is_whitespace())
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
        .collect();
    num.parse().ok()
}

struct Medians(BTreeMap<(String, String), f64>);

impl Medians {
    fn load(dir: &Path) -> Medians {
        let mut m = BTreeMap::new();
        for group in fs::read_dir(dir).into_iter().flatten().flatten() {
            for bench in fs::read_dir(group.path()).into_iter().flatten().flatten() {
                if let Some(v) = median(&bench.path().join("new/estimates.json")) {
                    let g = group.file_name().to_string_lossy().into_owned();
                    let b = bench.file_name().to_string_lossy().into_owned();
                    m.insert((g, b), v);
                }
            }
        }
        Medians(m)
    }

    /// Per benchmark, the median over several runs' medians (runs that lack it are skipped).
    fn median_of(runs: &[Medians]) -> Medians {
        let mut all: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for run in runs {
            for (k, v) in &run.0 {
                all.entry(k.clone()).or_default().push(*v);
            }
        }
        Medians(
            all.into_iter()
                .map(|(k, mut v)| {
                    v.sort_by(f64::total_cmp);
                    let mid = v.len() / 2;
                    let m = if v.len() % 2 == 1 {
                        v[mid]
                    } else {
                        (v[mid - 1] + v[mid]) / 2.0
                    };
                    (k, m)
                })
                .collect(),
        )
    }

    fn get(&self, group: &str, bench: &str) -> Option<f64> {
        self.0.get(&(group.to_owned(), bench.to_owned())).copied()
    }
}

fn ns(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0} ns"),
        Some(v) => format!("{v:.2} ns"),
        None => "–".to_owned(),
    }
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.2}×"))
}

fn main() {
    // No argument: the last run, in target/criterion. Arguments: several runs' copies of
    // that directory, and each figure is the median over them.
    let dirs: Vec<PathBuf> = match std::env::args_os()
        .skip(1)
        .map(PathBuf::from)
        .collect::<Vec<_>>()
    {
        dirs if dirs.is_empty() => {
            vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("target/criterion")]
        }
        dirs => dirs,
    };
    let runs: Vec<Medians> = dirs.iter().map(|d| Medians::load(d)).collect();
    if let Some(empty) = runs.iter().position(|m| m.0.is_empty()) {
        eprintln!(
            "no estimates under {}: run `cargo bench --bench peers` first",
            dirs[empty].display()
        );
        std::process::exit(1);
    }
    let m = Medians::median_of(&runs);
    let base = |b: &str| m.get("baselines", b);
    let bare_async = base("bare_async");

    match runs.len() {
        1 => println!("Medians of one `cargo bench --bench peers` run (criterion, wall time per call).\n"),
        n => println!("Per benchmark, the median over {n} `cargo bench --bench peers` runs of criterion's median (wall time per call).\n"),
    }
    print!("| workload |");
    for (_, name) in IMPLS {
        print!(" {name} |");
    }
    println!(" baseline |");
    println!("|---|{}---|", "---:|".repeat(IMPLS.len()));
    let rows: [(&str, &str, &str, Option<f64>); 4] = [
        (
            "closed_sync",
            "closed, success, sync",
            "one `AtomicU64::fetch_add(Relaxed)`",
            base("atomic_add"),
        ),
        (
            "open_sync",
            "open, rejection, sync",
            "one `tokio::time::Instant::now()`",
            base("clock_read"),
        ),
        (
            "closed_async",
            "closed, success, async (current_thread)",
            "bare async fn",
            bare_async,
        ),
        (
            "open_async",
            "open, rejection, async (current_thread)",
            "bare async fn",
            bare_async,
        ),
    ];
    for (group, label, base_name, base_v) in rows {
        print!("| {label} |");
        for (id, _) in IMPLS {
            print!(" {} |", ns(m.get(group, id)));
        }
        println!(" {base_name}: {} |", ns(base_v));
    }
    print!("| async closed success over the bare async fn |");
    for (id, _) in IMPLS {
        print!(
            " {} |",
            match (m.get("closed_async", id), bare_async) {
                (Some(v), Some(b)) => format!("+{:.2} ns", v - b),
                _ => "–".to_owned(),
            }
        );
    }
    println!(" bare async fn: {} |", ns(bare_async));
    print!("| 2 threads on one breaker: per-thread cost ÷ 1-thread cost |");
    let scaling = |id: &str| Some(m.get("scaling_2t", id)? / m.get("scaling_1t", id)?);
    for (id, _) in IMPLS {
        print!(" {} |", ratio(scaling(id)));
    }
    println!(
        " atomic add: {}, mutex: {}, bare call: {}, thread-private work: {} |",
        ratio(scaling("atomic_add")),
        ratio(scaling("mutex_lock")),
        ratio(scaling("bare")),
        ratio(scaling("private_work"))
    );
    print!("| 1 thread, closed success (scaling group) |");
    for (id, _) in IMPLS {
        print!(" {} |", ns(m.get("scaling_1t", id)));
    }
    println!(" atomic add: {} |", ns(m.get("scaling_1t", "atomic_add")));
    print!("| 2 threads, per-thread time per call |");
    for (id, _) in IMPLS {
        print!(" {} |", ns(m.get("scaling_2t", id)));
    }
    println!(" atomic add: {} |", ns(m.get("scaling_2t", "atomic_add")));
    print!("| 2 threads refused by one open breaker: per-thread cost ÷ 1-thread cost |");
    let open_scaling =
        |id: &str| Some(m.get("scaling_open_2t", id)? / m.get("scaling_open_1t", id)?);
    for (id, _) in IMPLS {
        print!(" {} |", ratio(open_scaling(id)));
    }
    println!(
        " breaker forced open (no clock read): {} |",
        ratio(open_scaling("breaker_forced"))
    );
    print!("| 1 thread, open rejection (scaling group) |");
    for (id, _) in IMPLS {
        print!(" {} |", ns(m.get("scaling_open_1t", id)));
    }
    println!(" |");
    print!("| 2 threads, per-thread time per rejection |");
    for (id, _) in IMPLS {
        print!(" {} |", ns(m.get("scaling_open_2t", id)));
    }
    println!(" |");

    println!("\nBaselines: bare call {}, one relaxed atomic add {}, one clock read {}, one uncontended mutex {}, bare async fn {}.\n",
        ns(base("bare")), ns(base("atomic_add")), ns(base("clock_read")), ns(base("mutex_lock")), ns(bare_async));

    println!("Ratios (of the figures above, so within one run or of the same medians):\n");
    println!("| workload | breaker ÷ baseline | breaker (attribute) ÷ baseline | best peer | best peer ÷ breaker |");
    println!("|---|---:|---:|---|---:|");
    for (group, label, base_name, base_v) in rows {
        let best = PEERS
            .iter()
            .filter_map(|p| Some((*p, m.get(group, p)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let r = |id: &str| Some(m.get(group, id)? / base_v?);
        println!(
            "| {label} (baseline: {base_name}) | {} | {} | {} | {} |",
            ratio(r("breaker")),
            ratio(r("breaker_attr")),
            best.map_or("–".to_owned(), |(p, v)| format!("{p} ({})", ns(Some(v)))),
            ratio(best.and_then(|(_, v)| Some(v / m.get(group, "breaker")?))),
        );
    }

    readme(&m);
    part_four(&m);
    keyed(&m);
    tower_layer(&m);
}

/// The README's *Performance* table: these medians with, in brackets, the instructions over
/// the bare call that `scripts/callgrind.sh` wrote to `target/callgrind-over-bare.tsv` (its
/// last run; the brackets are left out if there is none).
fn readme(m: &Medians) {
    let tsv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/callgrind-over-bare.tsv");
    let ir: BTreeMap<(String, String), String> = fs::read_to_string(&tsv)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            let (i, w, v) = (f.next()?, f.next()?, f.next()?);
            Some(((i.to_owned(), w.to_owned()), v.to_owned()))
        })
        .collect();
    // The criterion ids against callgrind.sh's implementation names.
    let impls = [
        ("breaker", "breaker"),
        ("failsafe", "failsafe"),
        ("recloser", "recloser"),
        ("tower", "tower"),
        ("tower_resilience", "resilience"),
        ("seatbelt", "seatbelt"),
    ];
    let bare_async = m.get("baselines", "bare_async");
    let note = if ir.is_empty() {
        ", not found: run scripts/callgrind.sh"
    } else {
        ""
    };
    println!(
        "\nThe README's table (wall time; in brackets, Ir over the bare call or the bare async fn, \
         from `target/callgrind-over-bare.tsv`{note}):\n"
    );
    print!("| workload |");
    for (id, _) in impls {
        let name = IMPLS.iter().find(|(i, _)| *i == id).map_or(id, |(_, n)| n);
        print!(" {name} |");
    }
    println!();
    println!("| --- |{}", " ---: |".repeat(impls.len()));
    for (group, label, over_bare) in [
        ("closed_sync", "closed, success, sync", false),
        ("open_sync", "open, rejection, sync", false),
        (
            "closed_async",
            "closed, success, async, over the bare async fn",
            true,
        ),
        ("open_async", "open, rejection, async", false),
    ] {
        let best = impls
            .iter()
            .filter_map(|(id, _)| m.get(group, id))
            .min_by(f64::total_cmp);
        print!("| {label} |");
        for (id, cg) in impls {
            let v = m.get(group, id).map(|v| {
                let shown = if over_bare {
                    bare_async.map_or(ns(Some(v)), |b| format!("+{}", ns(Some(v - b))))
                } else {
                    ns(Some(v))
                };
                if Some(v) == best {
                    format!("**{shown}**")
                } else {
                    shown
                }
            });
            let bracket = ir
                .get(&(cg.to_owned(), group.to_owned()))
                .map_or(String::new(), |v| format!(" [{v}]"));
            print!(" {}{bracket} |", v.unwrap_or_else(|| "–".to_owned()));
        }
        println!();
    }
    print!("| 2 threads refused by one open breaker, per-thread cost ÷ 1 thread |");
    for (id, _) in impls {
        let r = (|| Some(m.get("scaling_open_2t", id)? / m.get("scaling_open_1t", id)?))();
        print!(" {} |", r.map_or(String::new(), |r| format!("{r:.2}×")));
    }
    println!();
}

/// The `part_four` group: each feature's row beside the plain call it adds to.
fn part_four(m: &Medians) {
    let g = "part_four";
    if m.get(g, "closed_async").is_none() {
        return;
    }
    let p = |b: &str| m.get(g, b);
    println!("\nPart four's features (`part_four` group; wall time per call):\n");
    println!("| row | median | over |");
    println!("|---|---:|---|");
    for (id, label, base, base_label) in [
        (
            "retry_first_attempt",
            "`call_retried`, `retry(3)`, first attempt succeeds",
            "closed_async",
            "`call`",
        ),
        (
            "retry_unconfigured",
            "`call_retried` without `retry`",
            "closed_async",
            "`call`",
        ),
        (
            "attr_retry_first_attempt",
            "attribute `retry = 3`, first attempt succeeds",
            "attr_closed_async",
            "the attribute without `retry`",
        ),
        (
            "closed_sync_reconfigured",
            "closed sync, another thread reconfiguring in a loop",
            "closed_sync",
            "closed sync left alone",
        ),
    ] {
        println!(
            "| {label} | {} | {} ({base_label}: {}) |",
            ns(p(id)),
            match (p(id), p(base)) {
                (Some(v), Some(b)) => format!("{:+.2} ns", v - b),
                _ => "–".to_owned(),
            },
            ns(p(base)),
        );
    }
}

/// `--bench keyed`, if the runs hold it: each row, then the 2-thread rows over the 1-thread
/// one (per-thread time per call, all three through the same harness).
fn keyed(m: &Medians) {
    let g = "keyed";
    if m.get(g, "keyed_str").is_none() {
        return;
    }
    let k = |b: &str| m.get(g, b);
    println!("\nKeyed (`--bench keyed`; wall time per call; the thread rows: per-thread time per call):\n");
    println!("| row | median |");
    println!("|---|---:|");
    for (id, label) in [
        ("unkeyed", "unkeyed `Breaker::call_sync`"),
        ("keyed_str", "keyed, `String` key (1 000 keys)"),
        ("keyed_u64", "keyed, `u64` key"),
        (
            "lookup_std_rwlock_hashmap",
            "lookup alone: `RwLock<HashMap>`",
        ),
        ("lookup_std_hashmap", "lookup alone: `HashMap`"),
        ("one_thread", "keyed, 1 thread"),
        ("two_threads_distinct", "keyed, 2 threads on distinct keys"),
        ("two_threads_shared", "keyed, 2 threads on one shared key"),
    ] {
        println!("| {label} | {} |", ns(k(id)));
    }
    let over = |a: &str, b: &str| Some(k(a)? / k(b)?);
    println!("\n| 2 threads ÷ 1 thread (per-thread time per call) | ratio |");
    println!("|---|---:|");
    println!(
        "| distinct keys | {} |",
        ratio(over("two_threads_distinct", "one_thread"))
    );
    println!(
        "| one shared key | {} |",
        ratio(over("two_threads_shared", "one_thread"))
    );
    println!(
        "| keyed ÷ unkeyed (1 thread, `String` key) | {} |",
        ratio(over("keyed_str", "unkeyed"))
    );
}

/// `--bench tower_layer`, if the runs hold it: each row and its cost over the bare service.
fn tower_layer(m: &Medians) {
    let g = "tower_layer";
    let Some(bare) = m.get(g, "bare") else {
        return;
    };
    println!("\nTower layers (`--bench tower_layer`; per request: `ready().await`, then `call(x).await`):\n");
    println!("| row | median | over the bare service |");
    println!("|---|---:|---:|");
    for id in [
        "bare",
        "breaker",
        "tower_resilience",
        "breaker_http",
        "engine_owned",
        "engine_owned_classified",
        "breaker_open",
        "tower_resilience_open",
    ] {
        let v = m.get(g, id);
        println!(
            "| {id} | {} | {} |",
            ns(v),
            v.map_or("–".to_owned(), |v| format!("+{:.2} ns", v - bare))
        );
    }
    // Feature `grpc`: a gRPC request, over the same service alone.
    let Some(grpc_bare) = m.get(g, "grpc_bare") else {
        return;
    };
    println!("\ngRPC (`--features grpc`; a request answered `grpc-status: 0` in its headers):\n");
    println!("| row | median | over the bare service |");
    println!("|---|---:|---:|");
    for id in [
        "grpc_bare",
        "grpc_breaker",
        "grpc_over_http_layer",
        "grpc_tower_resilience",
    ] {
        let v = m.get(g, id);
        println!(
            "| {id} | {} | {} |",
            ns(v),
            v.map_or("–".to_owned(), |v| format!("+{:.2} ns", v - grpc_bare))
        );
    }
}
