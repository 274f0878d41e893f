#!/usr/bin/env bash
# The compile-time cost of `#[breaker::circuit_breaker]`: builds a generated crate of 200
# annotated functions of mixed shapes and the same crate without the attribute, and prints
# the ratio and the cost per function (the target: at most 3 ms of debug build).
#
#   scripts/compile_cost.sh [--release] [RUNS]      (default: debug, RUNS = 3)
#   scripts/compile_cost.sh --instructions          (the compiler's instructions, callgrind)
#   OWN_TYPES=1 scripts/compile_cost.sh ...         (each function returns a type of its own)
#
# Both crates live in a temporary directory and depend on this checkout's `breaker`; they share
# one target directory, so the dependencies (breaker, breaker-macros, syn, tokio, ...) are built
# once, first. Each measurement then touches `src/lib.rs` and times `cargo build` of the crate
# alone (macro expansion, type checking and code generation of the 200 functions), the two
# crates in turn. The median of RUNS measurements is reported for each crate.
set -euo pipefail
shopt -s inherit_errexit

profile=()
label=debug
# --instructions: each crate built once under callgrind (every rustc thread counted), which
# repeats to a few parts in ten thousand where wall and CPU time move by half on a shared
# machine. About 5 minutes.
instructions=
if [[ ${1:-} == --instructions ]]; then
    instructions=1
    shift
fi
if [[ ${1:-} == --release ]]; then
    profile=(--release)
    label=release
    shift
fi
RUNS=${1:-3}
FUNCS=200

# BREAKER_ROOT: another checkout to measure (an older commit, for a before/after).
root=${BREAKER_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
tmp=$(mktemp -d)
# COMPILE_COST_KEEP=1: keep the two crates (for `cargo build --timings`, `-Z time-passes`).
if [[ -z ${COMPILE_COST_KEEP:-} ]]; then trap 'rm -rf "$tmp"' EXIT; else echo "crates in $tmp" >&2; fi
# OWN_TYPES=1: each function returns a type of its own (`io::Result<R17>`), with its own
# fallback and judge where it has one, as a service's clients do; by default every function
# returns `io::Result<u64>`, so the runtime's code generic over the result type is compiled
# once for all 200, and only what is compiled per function is measured.
own_types=${OWN_TYPES:-}
# COMPILE_COST_TARGET: a target directory kept between runs (dependencies built once).
export CARGO_TARGET_DIR="${COMPILE_COST_TARGET:-$tmp/target}"
# A whole compilation of the crate each time: incremental compilation would reuse the last
# build's code after the `touch`, and time little more than parsing and expansion.
export CARGO_INCREMENTAL=0

# gen NAME ANNOTATE: writes the crate; the functions come in eight shapes, as a real
# service's clients would have them: async and plain, with attribute arguments, a fallback
# (a path, a closure), a key, a method, an `is_failure` judge, `classify` (the same
# functions, fallbacks and judges are in both crates; only the attributes differ).
gen() {
    local dir="$tmp/$1" annotate=$2 i attr body shape args
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<EOF
[package]
name = "$1"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
breaker = { path = "$root" }
EOF
    {
        echo "//! $FUNCS functions ($1)."
        echo "#![allow(dead_code, unused_variables)]"
        echo "use std::io;"
        echo "use breaker::{CallError, Verdict};"
        echo "pub struct Client { pub host: String }"
        echo "async fn cached(x: u64, _: CallError<io::Error>) -> io::Result<u64> { Ok(x) }"
        echo "fn transient(e: &io::Error) -> bool { e.kind() != io::ErrorKind::NotFound }"
        echo "fn judge(r: &io::Result<u64>) -> Verdict { if r.is_ok() { Verdict::Success } else { Verdict::Failure } }"
        for ((i = 0; i < FUNCS; i++)); do
            # t: the result's type; ok: the value made of the number; the fallback and judge.
            local t=u64 ok="x + $i" fallback=cached judge=judge wrap=x
            if [[ -n $own_types ]]; then
                t="R$i" ok="R$i(x + $i)" fallback="cached_$i" judge="judge_$i" wrap="R$i(x)"
                echo "pub struct R$i(pub u64);"
                echo "async fn cached_$i(x: u64, _: CallError<io::Error>) -> io::Result<R$i> { Ok(R$i(x)) }"
                echo "fn judge_$i(r: &io::Result<R$i>) -> Verdict { if r.is_ok() { Verdict::Success } else { Verdict::Failure } }"
            fi
            body="if x == $i { Err(io::Error::other(\"down\")) } else { Ok($ok) }"
            shape=$((i % 8))
            case $shape in
            0) args="threshold = 5, cool_off = \"30s\", timeout = \"2s\"" ;;
            1) args="threshold = $((i % 7 + 1))" ;;
            2) args="failure_rate = 50, window = 20, fallback = $fallback" ;;
            3) args="threshold = 3, slow_call = \"500ms\", fallback = |x, _| Ok($wrap)" ;;
            4) args="key = host, failure_rate = 50, window = 20" ;;
            5) args="threshold = 3, probes = 2" ;;
            6) args="is_failure = transient, cool_off = \"10s\"" ;;
            7) args="classify = $judge" ;;
            esac
            attr=""
            if ((annotate)); then attr="#[breaker::circuit_breaker($args)]"; fi
            case $shape in
            0 | 2 | 6) printf '%s\npub async fn call_%d(x: u64) -> io::Result<%s> {\n    %s\n}\n' "$attr" "$i" "$t" "$body" ;;
            1 | 3 | 7) printf '%s\npub fn call_%d(x: u64) -> io::Result<%s> {\n    %s\n}\n' "$attr" "$i" "$t" "$body" ;;
            4) printf '%s\npub async fn call_%d(host: &str, x: u64) -> io::Result<%s> {\n    %s\n}\n' "$attr" "$i" "$t" "$body" ;;
            5) printf 'impl Client {\n    %s\n    pub async fn call_%d(&self, x: u64) -> io::Result<%s> {\n        %s\n    }\n}\n' "$attr" "$i" "$t" "$body" ;;
            esac
        done
        # Every function is called and every future polled once, as a program would: a
        # future's state machine (and the runtime's call future around it) is compiled only
        # where it is polled.
        echo "pub fn use_all(cx: &mut std::task::Context<'_>, c: &Client) {"
        echo "    use std::future::Future;"
        for ((i = 0; i < FUNCS; i++)); do
            case $((i % 8)) in
            0 | 2 | 6) echo "    let _ = std::pin::pin!(call_$i(1)).poll(cx);" ;;
            1 | 3 | 7) echo "    let _ = call_$i(1);" ;;
            4) echo "    let _ = std::pin::pin!(call_$i(&c.host, 1)).poll(cx);" ;;
            5) echo "    let _ = std::pin::pin!(c.call_$i(1)).poll(cx);" ;;
            esac
        done
        echo "}"
    } >"$dir/src/lib.rs"
}

gen annotated 1
gen plain 0

# time NAME: one rebuild of the crate alone; prints the wall time and the CPU time (user +
# system, of cargo and the compiler), in seconds. The CPU time is the steadier figure on a
# machine that is doing other work.
time_one() {
    local dir="$tmp/$1" t
    touch "$dir/src/lib.rs"
    t=$( { TIMEFORMAT='%R %U %S'; time (cd "$dir" && cargo build --quiet "${profile[@]}"); } 2>&1)
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' <<<"$t"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# count NAME: the instructions rustc executes compiling the crate alone, its dependencies
# built first (the wrapper runs valgrind only for the crate named).
count() {
    local dir="$tmp/$1"
    (cd "$dir" && RUSTC_WRAPPER="$tmp/count-rustc" cargo build --quiet "${profile[@]}")
    touch "$dir/src/lib.rs"
    (cd "$dir" && VG_CRATE=$1 VG_OUT="$tmp/callgrind.$1" RUSTC_WRAPPER="$tmp/count-rustc" \
        cargo build --quiet "${profile[@]}")
    awk '/I *refs:/ { gsub(",", "", $NF); print $NF }' "$tmp/callgrind.$1.log" | tail -1
}

if [[ -n $instructions ]]; then
    command -v valgrind >/dev/null || {
        echo "compile_cost.sh --instructions needs valgrind (apt-get install valgrind)" >&2
        exit 1
    }
    printf '%s\n' '#!/usr/bin/env bash' 'rustc=$1' 'shift' \
        'if [[ -n ${VG_CRATE:-} ]]; then for a in "$@"; do if [[ $a == "$VG_CRATE" ]]; then' \
        '  exec valgrind --tool=callgrind --callgrind-out-file="$VG_OUT" "$rustc" "$@" 2>>"$VG_OUT.log"' \
        'fi; done; fi' 'exec "$rustc" "$@"' >"$tmp/count-rustc"
    chmod +x "$tmp/count-rustc"
    echo "compile cost of #[circuit_breaker]: $FUNCS functions, $label build, instructions" >&2
    plain=$(count plain)
    annotated=$(count annotated)
    awk -v p="$plain" -v a="$annotated" -v f="$FUNCS" -v l="$label" 'BEGIN {
        printf "| crate (%d fns, %s) | instructions to compile |\n|---|---:|\n", f, l
        printf "| without the attribute | %.3f G |\n", p / 1e9
        printf "| with #[circuit_breaker] | %.3f G |\n", a / 1e9
        printf "| per annotated function, over the plain crate | %.1f M |\n", (a - p) / f / 1e6
    }'
    exit 0
fi

echo "compile cost of #[circuit_breaker]: $FUNCS functions, $label build, median of $RUNS" >&2
# The two crates are rebuilt in turn, round by round: this guest's speed drifts by a third
# within an hour, and a drift between all the plain builds and all the annotated ones would
# be read as the attribute's cost.
(cd "$tmp/plain" && cargo build --quiet "${profile[@]}") # dependencies, once
(cd "$tmp/annotated" && cargo build --quiet "${profile[@]}")
pw=() pc=() aw=() ac=()
for ((r = 0; r < RUNS; r++)); do
    read -r w c <<<"$(time_one plain)"
    pw+=("$w") pc+=("$c")
    read -r w c <<<"$(time_one annotated)"
    aw+=("$w") ac+=("$c")
done
echo "  plain: wall ${pw[*]} s; cpu ${pc[*]} s" >&2
echo "  annotated: wall ${aw[*]} s; cpu ${ac[*]} s" >&2
plain=$(median "${pw[@]}") plain_cpu=$(median "${pc[@]}")
annotated=$(median "${aw[@]}") annotated_cpu=$(median "${ac[@]}")
awk -v p="$plain" -v a="$annotated" -v pc="$plain_cpu" -v ac="$annotated_cpu" -v f="$FUNCS" -v l="$label" 'BEGIN {
    printf "| crate (%d fns, %s) | build, wall (median) | build, CPU (median) |\n|---|---:|---:|\n", f, l
    printf "| without the attribute | %.2f s | %.2f s |\n", p, pc
    printf "| with #[circuit_breaker] | %.2f s | %.2f s |\n", a, ac
    printf "| ratio | %.2fx | %.2fx |\n", a / p, ac / pc
    printf "| cost per annotated function | %.1f ms | %.1f ms |\n", (a - p) * 1000 / f, (ac - pc) * 1000 / f
}'
