#!/usr/bin/env bash
# NVML on a real GPU (issue 21): the probe, a real CUDA process through a real `berth agent`
# (attribution, dcgm-exporter metrics, kept while busy, reclaimed once idle), the probe's
# cost at 1 Hz and the agent's own CPU use.
#
#   tests/device/nvml.sh prepare     # here: build, strip and copy the binaries into .device/
#   tests/device/nvml.sh run         # on the GPU machine, from the repository root
#
# The GPU machine has no Rust toolchain: `prepare` builds the release `berth`, the
# `gpu_probe` bench and the `gpu_nvml` test binary (which runs `$BERTH_BIN`) and copies them
# with this folder's scripts into `.device/` (ignored by git), which travels to that machine.
# Results go to $OUT (or ./device-out).
set -euo pipefail
case "${1:-}" in
prepare)
    cargo build --release -p berth-runtime --bin berth
    bench=$(cargo bench -p berth-runtime --bench gpu_probe --no-run --message-format=json \
        | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="gpu_probe" and m.get("executable"): print(m["executable"])')
    test=$(cargo test -p berth-runtime --test gpu_nvml --no-run --message-format=json \
        | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="gpu_nvml" and m.get("executable"): print(m["executable"])')
    mkdir -p .device
    cp target/release/berth "$bench" "$test" tests/device/nvml.sh tests/device/agent_cpu.py .device/
    mv ".device/$(basename "$bench")" .device/gpu_probe
    mv ".device/$(basename "$test")" .device/gpu_nvml
    strip .device/berth .device/gpu_probe .device/gpu_nvml
    grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >>.git/info/exclude
    du -sh .device
    ;;
run)
    out=${OUT:-$PWD/device-out}
    mkdir -p "$out"
    cd .device
    export BERTH_BIN=$PWD/berth
    nvidia-smi --query-gpu=name,driver_version,mig.mode.current,memory.total --format=csv
    echo "=== tests"
    BERTH_REQUIRE_GPU=1 timeout 300 ./gpu_nvml --test-threads=1 --nocapture >"$out/test.log" 2>&1 \
        && echo "tests passed" || echo "tests FAILED"
    tail -c 4000 "$out/test.log"
    echo "=== probe cost"
    timeout 60 ./gpu_probe 30 2>&1 | tee "$out/bench.log"
    echo "=== berth agent CPU"
    timeout 90 python3 agent_cpu.py "$BERTH_BIN" 40 "$out" 2>&1 | tee "$out/agent.log"
    ;;
*)
    echo "usage: tests/device/nvml.sh prepare|run" >&2
    exit 2
    ;;
esac
