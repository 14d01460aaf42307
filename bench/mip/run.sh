#!/bin/sh
# berth's placement against an exact MIP (HiGHS): exports the instances, then compares.
# Usage: bench/mip/run.sh [SIZES] [SEEDS] [CAPACITY%]   (defaults below; see docs/performance.md)
# A level pN is a placeable instance: exported, solved for what the MIP places, cut to that.
# Those counts are kept in target/mip-instances-counts and reused while an instance's problem
# is unchanged (compare.py keeps a digest beside each); MIP_TIME_LIMIT (seconds, default 300)
# bounds each HiGHS solve.
set -eu
cd "$(dirname "$0")/../.."
SIZES=${1:-50x10,100x20,200x30,500x50}
SEEDS=${2:-1-3}
LEVELS=${3:-100,50,30,p100,p50}
LIMIT=${MIP_TIME_LIMIT:-300}
VENV=target/mip-venv
OUT=target/mip-instances
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet highspy
fi
cargo build --profile bench -p berth-compiler --example mip_instances
rm -rf "$OUT"
EXPORT=target/release/examples/mip_instances
case "$LEVELS" in
*p*)
    PLACEABLE=$(echo "$LEVELS" | tr ',' '\n' | grep '^p' | paste -sd, -)
    rm -rf "$OUT-uncut"
    "$EXPORT" "$OUT-uncut" "$SIZES" "$SEEDS" "$PLACEABLE" >/dev/null
    "$VENV/bin/python" bench/mip/compare.py "$OUT-uncut" --write-counts "$OUT-counts" \
        --time-limit "$LIMIT"
    ;;
esac
"$EXPORT" "$OUT" "$SIZES" "$SEEDS" "$LEVELS" "$OUT-counts" >/dev/null
"$VENV/bin/python" bench/mip/compare.py "$OUT" --csv target/mip-results.csv --time-limit "$LIMIT"
