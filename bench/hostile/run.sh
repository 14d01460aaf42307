#!/usr/bin/env bash
# The hostile-input benchmark (issue 17): `berth check`, `berth fmt --check` and `berth plan`
# end to end through the release binary, on inputs just under 1 MB (bench/hostile/gen.py).
# Goal: each under 1 s. Prints, per input and command, the best wall time of RUNS, the CPU
# time of that run, the peak memory, the exit code and how much stderr it wrote.
#
#   bench/hostile/run.sh [RUNS]          # default 3
#
# BERTH=path/to/berth skips the build (to compare two binaries).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
target="${CARGO_TARGET_DIR:-target}"
if [[ -z "${BERTH:-}" ]]; then
  cargo build --release -p berth-runtime --bin berth >&2
  BERTH="$target/release/berth"
fi
inputs="$target/hostile"
python3 bench/hostile/gen.py "$inputs" >&2
exec python3 bench/hostile/time.py "$BERTH" "$inputs" "$runs"
