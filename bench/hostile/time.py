#!/usr/bin/env python3
"""Times `berth check|fmt --check|plan` on every input of bench/hostile/gen.py.

    bench/hostile/time.py BERTH INPUTS_DIR RUNS
"""

import os
import resource
import subprocess
import sys
import time

COMMANDS = [["check"], ["fmt", "--check"], ["plan", "--at", "2025-06-04T10:00:00Z"]]
LIMIT_S = 60


def one(berth, args, path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run([berth, *args, path], capture_output=True, timeout=LIMIT_S)
        code, err = done.returncode, len(done.stderr)
    except subprocess.TimeoutExpired:
        code, err = "timeout", 0
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss, code, err


def main():
    berth, root, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(f"{'input':<14} {'command':<12} {'best wall':>10} {'cpu':>8} {'peak RSS*':>10} "
          f"{'exit':>5} {'stderr':>10}")
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        for args in COMMANDS:
            results = [one(berth, args, path) for _ in range(runs)]
            wall, cpu, rss, code, err = min(results, key=lambda r: r[0])
            print(f"{name:<14} {args[0] if args[0] != 'fmt' else 'fmt --check':<12} "
                  f"{wall * 1000:>8.0f}ms {cpu * 1000:>6.0f}ms {rss / 1024:>8.0f}MB "
                  f"{code!s:>5} {err:>10,}")
    print("* peak RSS: the largest of any run so far (getrusage of children)")


if __name__ == "__main__":
    main()
