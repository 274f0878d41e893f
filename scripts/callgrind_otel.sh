#!/usr/bin/env bash
# Instructions per call of feature `otel` (issue 45), from callgrind: breaker's rows built
# without the feature, with it compiled in and unused, and installed on OpenTelemetry's SDK.
#
#   scripts/callgrind_otel.sh [N]       (default N = 20000; builds `cg` twice and `cg_otel`)
#
# Each figure is (Ir(2N) - Ir(N)) / N, as in scripts/callgrind.sh:
# - without: `cg breaker <workload>` built without the feature (benches/target);
# - compiled in: the same `cg`, built with `--features otel` (benches/target/otel);
# - installed: `cg_otel meter <workload>` from that build: `breaker::otel::install` on an
#   `SdkMeterProvider` whose reader never collects within a run (the SDK records each
#   call's duration; nothing is exported); `cg_otel unused` is that driver, not installed.
# No subscriber wants the spans in any of them (the spans' cost is the subscriber's).
set -euo pipefail

N=${1:-20000}
if ! [[ $N =~ ^[0-9]+$ ]] || ((N == 0)); then
    echo "usage: $0 [N]   (N: a positive number of calls)" >&2
    exit 2
fi
command -v valgrind >/dev/null || {
    echo "$0: valgrind is not installed (apt-get install valgrind)" >&2
    exit 1
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/benches"
target=${CARGO_TARGET_DIR:-$root/benches/target}
cargo build --quiet --release --bin cg --target-dir "$target"
cargo build --quiet --release --bin cg --bin cg_otel --features otel --target-dir "$target/otel"
plain="$target/release/cg"
otel="$target/otel/release"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ir BIN ARGS...: total instructions of one run.
ir() {
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$@" >/dev/null 2>"$tmp/log" || {
        echo "$0: $* failed:" >&2
        cat "$tmp/log" >&2
        exit 1
    }
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/log"
}

# per_call BIN IMPL WORKLOAD: instructions per call of `BIN IMPL WORKLOAD k`.
per_call() {
    local a b
    a=$(ir "$1" "$2" "$3" "$N")
    b=$(ir "$1" "$2" "$3" $((2 * N)))
    awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }'
}

echo "callgrind instructions per call, feature \`otel\` (N = $N, $(date -u +%Y-%m-%d), $(rustc --version))"
echo
echo "| workload | without | compiled in, unused | \`cg_otel unused\` | installed (\`cg_otel meter\`) |"
echo "|---|---:|---:|---:|---:|"
for w in closed_sync open_sync closed_async open_async; do
    without=$(per_call "$plain" breaker "$w")
    compiled=$(per_call "$otel/cg" breaker "$w")
    unused=$(per_call "$otel/cg_otel" unused "$w")
    meter=$(per_call "$otel/cg_otel" meter "$w")
    echo "| $w | $without | $compiled | $unused | $meter |"
done
