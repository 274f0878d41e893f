#!/usr/bin/env bash
# Wall time, three runs: `cargo bench` of `peers`, `keyed` and `tower_layer`, run three times,
# `benches/target/criterion` copied after each run into `benches/target/run1`, `run2`, `run3`,
# then `report` over the three copies: per benchmark, the median over the runs of criterion's
# median (wall time on a shared machine moves from one run to the next; one run is not enough).
#
#   scripts/wall.sh            (full runs: ~7 min each, ~21 min in all)
#   scripts/wall.sh --quick    (a smoke run: short warm-up and measurement, 10 samples, copies
#                               in quick-run1..3 so real runs are not overwritten; it checks
#                               that everything runs and the tables fill, not for figures)
#
# Each run starts from an empty `target/criterion`, so a copy holds that run alone; the
# directory found there before the first run is kept as `target/criterion.prev`.
# Run it with nothing else on the machine. The tables go to stdout (criterion's own output to
# stderr), so `scripts/wall.sh > tables.md` keeps them.
set -euo pipefail

quick=0
case ${1:-} in
"") ;;
-q | --quick) quick=1 ;;
*)
    echo "usage: $0 [--quick]" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/benches"
target="$root/benches/target"

args=()
prefix=run
if ((quick)); then
    # peers.rs and tower_layer.rs set their groups' times only when these are not given.
    args=(--warm-up-time 0.1 --measurement-time 0.2 --sample-size 10)
    prefix=quick-run
fi

# Build everything first, so no run pays for (or is disturbed by) compilation.
cargo bench --quiet --no-run --bench peers --bench keyed >&2
cargo bench --quiet --no-run --bench tower_layer --features grpc >&2
cargo build --quiet --release --bin report

if [[ -d $target/criterion ]]; then
    rm -rf "$target/criterion.prev"
    mv "$target/criterion" "$target/criterion.prev"
fi
runs=()
for run in 1 2 3; do
    echo "wall.sh: run $run of 3" >&2
    rm -rf "$target/criterion"
    for bench in peers keyed; do
        cargo bench --quiet --bench "$bench" -- "${args[@]}" >&2
    done
    # With the gRPC layer's rows (feature `grpc`).
    cargo bench --quiet --bench tower_layer --features grpc -- "${args[@]}" >&2
    rm -rf "${target:?}/$prefix$run"
    cp -r "$target/criterion" "$target/$prefix$run"
    runs+=("$target/$prefix$run")
done

"$target/release/report" "${runs[@]}"
