#!/usr/bin/env bash
# The compile-time cost of `#[breaker::circuit_breaker]`: builds a generated crate of 200
# annotated functions and the same crate without the attribute, and prints the ratio.
#
#   scripts/compile_cost.sh [--release] [RUNS]      (default: debug, RUNS = 3)
#
# Both crates live in a temporary directory and depend on this checkout's `breaker`; they share
# one target directory, so the dependencies (breaker, breaker-macros, syn, tokio, ...) are built
# once, first. Each measurement then touches `src/lib.rs` and times `cargo build` of the crate
# alone (macro expansion, type checking and code generation of the 200 functions). The median
# of RUNS measurements is reported for each crate.
set -euo pipefail
shopt -s inherit_errexit

profile=()
label=debug
if [[ ${1:-} == --release ]]; then
    profile=(--release)
    label=release
    shift
fi
RUNS=${1:-3}
FUNCS=200

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CARGO_TARGET_DIR="$tmp/target"

# gen NAME ANNOTATE: writes the crate; half the functions are async, half are plain, with
# a spread of attribute arguments, as a real service's clients would have (`timeout` only on
# async functions, where it is allowed).
gen() {
    local dir="$tmp/$1" annotate=$2 i attr
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
        echo "#![allow(dead_code)]"
        echo "use std::io;"
        for ((i = 0; i < FUNCS; i++)); do
            attr=""
            if ((annotate)); then
                case $((i % 4)) in
                0) attr="#[breaker::circuit_breaker(threshold = 5, cool_off = \"30s\", timeout = \"2s\")]" ;;
                1) attr="#[breaker::circuit_breaker(threshold = $((i % 7 + 1)))]" ;;
                2) attr="#[breaker::circuit_breaker(failure_rate = 50, window = 20, cool_off = \"10s\")]" ;;
                3) attr="#[breaker::circuit_breaker(threshold = 3, slow_call = \"500ms\", probes = 2)]" ;;
                esac
            fi
            if ((i % 2 == 0)); then
                printf '%s\npub async fn call_%d(x: u64) -> io::Result<u64> {\n    if x == %d { Err(io::Error::other("down")) } else { Ok(x + %d) }\n}\n' \
                    "$attr" "$i" "$i" "$i"
            else
                printf '%s\npub fn call_%d(x: u64) -> io::Result<u64> {\n    if x == %d { Err(io::Error::other("down")) } else { Ok(x + %d) }\n}\n' \
                    "$attr" "$i" "$i" "$i"
            fi
        done
    } >"$dir/src/lib.rs"
}

gen annotated 1
gen plain 0

now() { date +%s.%N; }

# measure NAME: RUNS timings of rebuilding the crate alone; prints the median in seconds.
measure() {
    local dir="$tmp/$1" t0 t1 times=()
    (cd "$dir" && cargo build --quiet "${profile[@]}") # dependencies, once
    for ((r = 0; r < RUNS; r++)); do
        touch "$dir/src/lib.rs"
        t0=$(now)
        (cd "$dir" && cargo build --quiet "${profile[@]}")
        t1=$(now)
        times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
    done
    echo "  $1: ${times[*]} s" >&2
    printf '%s\n' "${times[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

echo "compile cost of #[circuit_breaker]: $FUNCS functions, $label build, median of $RUNS" >&2
plain=$(measure plain)
annotated=$(measure annotated)
awk -v p="$plain" -v a="$annotated" -v f="$FUNCS" -v l="$label" 'BEGIN {
    printf "| crate (%d fns, %s) | build time (median) |\n|---|---:|\n", f, l
    printf "| without the attribute | %.2f s |\n| with #[circuit_breaker] | %.2f s |\n", p, a
    printf "| ratio | %.2fx |\n| cost per annotated function | %.1f ms |\n", a / p, (a - p) * 1000 / f
}'
