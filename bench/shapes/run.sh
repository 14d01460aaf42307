#!/bin/sh
# berth's plans, through its command line, against a MIP built from each instance's own data,
# on the shapes bench/mip lacks (dense, MIG-heavy, many small vs few big, production against
# experiments, moves of several replicas). Method and figures in docs/performance.md.
# Usage: bench/shapes/run.sh [SIZES] [SEEDS] [LEVELS] [-- compare.py options, e.g. --exact]
# MIP_TIME_LIMIT (seconds, default 60) bounds each HiGHS solve.
set -eu
cd "$(dirname "$0")/../.."
SIZES=${1:-10x4,40x8,100x16}
SEEDS=${2:-1-3}
LEVELS=${3:-p80,p100,o130}
[ $# -ge 3 ] && shift 3 || shift $#
[ "${1:-}" = "--" ] && shift
VENV=target/mip-venv
OUT=target/shapes
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet highspy
fi
cargo build --release --bin berth
python3 bench/shapes/generate.py "$OUT" --sizes "$SIZES" --seeds "$SEEDS" --levels "$LEVELS"
"$VENV/bin/python" bench/shapes/compare.py "$OUT" --berth target/release/berth \
    --time-limit "${MIP_TIME_LIMIT:-60}" --cache target/shapes-cache --csv target/shapes-results.csv "$@"
