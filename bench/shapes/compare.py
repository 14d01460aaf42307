#!/usr/bin/env python3
"""berth's plans, made through its command line, against a MIP built from the instance data.

For every instance `generate.py` wrote, runs `berth plan DIR/spec --at AT --output json` (and,
with `--exact`, `berth plan … --exact`), checks each placement against the instance's own rules
(an accelerator the workload accepts, its MIG profile and memory floor, pool units, CPU and
memory per target, `per_target` spread), then solves with HiGHS, lexicographically:

  1. replicas left unplaced, class by class (production, staging, development, experiment),
  2. replicas on a workload's `fallback` target,
  3. total cost per day,

and, for the cost gap, the cheapest way to place exactly the replicas per workload that berth
placed. Eligibility here is derived from `instance.json` (generate.py's `eligible`), never from
berth's candidate lists or plan, so a wrong rejection in berth is a miss here too.

Usage: compare.py INSTANCES [--berth PATH] [--exact] [--time-limit S] [--csv FILE]
"""

import argparse
import csv
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mip"))
from lexmip import CLASSES, COST, FALLBACK, INF, evaluate, solve  # noqa: E402
from generate import eligible, units  # noqa: E402


class Model:
    """One integer column per (workload, target, pool) the instance says is eligible."""

    def __init__(self, inst):
        self.inst = inst
        self.cols, self.col_of = [], {}
        self.by_workload = []
        for w, wl in enumerate(inst["workloads"]):
            mine = []
            for t in inst["targets"]:
                for p in t["pools"]:
                    if eligible(wl, p):
                        self.col_of[(w, t["name"], p["name"])] = len(self.cols)
                        mine.append(len(self.cols))
                        self.cols.append((w, t, p))
            self.by_workload.append(mine)
        self.n_x = len(self.cols)
        self.ub = [inst["workloads"][w]["replicas"] for w, _, _ in self.cols]
        self.binaries = []
        self.rows = []
        pools, cpu, mem, spread = {}, {}, {}, {}
        for c, (w, t, p) in enumerate(self.cols):
            wl = inst["workloads"][w]
            pools.setdefault((t["name"], p["name"]), {})[c] = wl["gpu"]
            cpu.setdefault(t["name"], {})[c] = wl["cpu"]
            mem.setdefault(t["name"], {})[c] = wl["memory_gib"]
            if wl["per_target"]:
                spread.setdefault((w, t["name"]), {})[c] = 1
        targets = {t["name"]: t for t in inst["targets"]}
        for (t, p), coefs in sorted(pools.items()):
            pool = next(q for q in targets[t]["pools"] if q["name"] == p)
            self.rows.append((-INF, units(pool), coefs))
        for t, coefs in sorted(cpu.items()):
            self.rows.append((-INF, targets[t]["cpu"], coefs))
        for t, coefs in sorted(mem.items()):
            self.rows.append((-INF, targets[t]["memory_gib"], coefs))
        for (w, _), coefs in sorted(spread.items()):
            self.rows.append((-INF, inst["workloads"][w]["per_target"], coefs))
        for w, cs in enumerate(self.by_workload):
            if cs:
                self.rows.append((-INF, inst["workloads"][w]["replicas"], {c: 1 for c in cs}))

    def workload_cols(self, w):
        return self.by_workload[w]

    def class_totals(self):
        return [sum(wl["replicas"] for wl in self.inst["workloads"] if wl["class"] == cls.lower())
                for cls in CLASSES]

    def stages(self):
        wls = self.inst["workloads"]
        placed = [[-1.0 if wls[w]["class"] == cls.lower() else 0.0 for w, _, _ in self.cols]
                  for cls in CLASSES]
        fallback = [1.0 if t["name"] == wls[w]["fallback"] else 0.0 for w, t, _ in self.cols]
        latency = [0.0] * self.n_x
        # Cost per replica per day, in currency units: gpu x gpu_hour x 24.
        cost = [wls[w]["gpu"] * t["gpu_hour_cents"] * 24 / 100 for w, t, _ in self.cols]
        return placed + [fallback, latency, cost]

    def violations(self, x):
        bad = []
        for _, up, coefs in self.rows:
            s = sum(v * x[c] for c, v in coefs.items())
            if s > up + 1e-6:
                bad.append(f"{s:g} > {up:g}")
        return bad


def cached_solve(model, args, counts=None):
    """`solve`, remembered under `--cache` by a SHA-256 of the instance, the counts asked
    for and the time limit, so a rerun against another berth binary only solves what its
    answer changed (the full optimum never, the same-placement cost where the counts moved)."""
    if not args.cache:
        return solve(model, args.time_limit, counts)
    key = hashlib.sha256(json.dumps(
        [model.inst, counts, args.time_limit], sort_keys=True).encode()).hexdigest()
    path = os.path.join(args.cache, key + ".json")
    if os.path.exists(path):
        c = json.load(open(path))
        return c["values"], None, c["seconds"], c["status"]
    values, x, seconds, status = solve(model, args.time_limit, counts)
    os.makedirs(args.cache, exist_ok=True)
    with open(path + ".tmp", "w") as out:
        json.dump({"values": values, "seconds": seconds, "status": status}, out)
    os.replace(path + ".tmp", path)
    return values, x, seconds, status


def run_berth(berth, inst_dir, at, extra):
    """The plan berth writes, its exit code and the seconds it took (wall, CPU)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [berth, "plan", os.path.join(inst_dir, "spec"), "--at", at, "--output", "json", *extra],
        capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        sys.exit(f"{inst_dir}: berth exited {proc.returncode}: {proc.stderr.strip()[:500]}")
    return json.loads(proc.stdout), proc.returncode, wall, cpu


def berth_x(model, plan, where):
    """berth's placements as MIP columns; a placement the instance forbids stops the bench."""
    x = np.zeros(model.n_x)
    index = {wl["name"]: w for w, wl in enumerate(model.inst["workloads"])}
    for entry in plan["workloads"]:
        w = index[entry["workload"]]
        for p in entry["placements"]:
            col = model.col_of.get((w, p["target"], p["pool"]))
            if col is None:
                sys.exit(f"{where}: berth placed `{entry['workload']}` on "
                         f"{p['target']}/{p['pool']}, which the instance makes ineligible")
            x[col] += p["replicas"]
    bad = model.violations(x)
    if bad:
        sys.exit(f"{where}: berth's plan breaks the instance's constraints: {bad[:3]}")
    return x


def pct(value, best):
    if best > 0:
        return (value - best) / best * 100
    return 0.0 if value <= 0 else float("inf")


def compare(inst_dir, args):
    inst = json.load(open(os.path.join(inst_dir, "instance.json")))
    name = os.path.basename(inst_dir.rstrip("/"))
    model = Model(inst)
    plan, code, wall, cpu = run_berth(args.berth, inst_dir, inst["at"], [])
    bx = berth_x(model, plan, name)
    b = evaluate(model, bx)
    m, _, seconds, status = cached_solve(model, args)
    counts = [int(sum(bx[c] for c in model.workload_cols(w)))
              for w in range(len(inst["workloads"]))]
    same, _, _, same_status = cached_solve(model, args, counts)
    bu, mu = [round(v) for v in b[:FALLBACK]], [round(v) for v in m[:FALLBACK]]
    row = {
        "instance": name, "shape": inst["shape"], "level": inst["level"],
        "size": f"{inst['workloads_n']}x{inst['targets_n']}",
        "workloads": len(inst["workloads"]),
        "replicas": sum(wl["replicas"] for wl in inst["workloads"]),
        "options": model.n_x,
        "berth_unplaced": "/".join(map(str, bu)), "mip_unplaced": "/".join(map(str, mu)),
        "miss": bu > mu,
        "infeasible_where_full": inst["placeable"] and sum(bu) > 0,
        "berth_exit": code,
        "berth_fallback": round(b[FALLBACK]), "mip_fallback_same": round(same[FALLBACK]),
        "berth_cost": b[COST], "same_placement_cost": same[COST],
        "gap_percent": pct(b[COST], same[COST]),
        "berth_wall_ms": wall * 1e3, "berth_cpu_ms": cpu * 1e3,
        "highs_ms": seconds * 1e3, "status": f"{status}/{same_status}",
    }
    if args.exact:
        eplan, _, ewall, _ = run_berth(args.berth, inst_dir, inst["at"],
                                       ["--exact", "--exact-time-limit", str(args.time_limit)])
        e = evaluate(model, berth_x(model, eplan, name + " (--exact)"))
        row["exact_unplaced"] = "/".join(str(round(v)) for v in e[:FALLBACK])
        row["exact_gap_percent"] = pct(e[COST], m[COST]) if round(e[FALLBACK]) == round(
            m[FALLBACK]) and [round(v) for v in e[:FALLBACK]] == mu else None
        row["exact_wall_ms"] = ewall * 1e3
    return row


def summarise(rows):
    print()
    groups = {}
    for r in rows:
        groups.setdefault((r["shape"], r["level"]), []).append(r)
    print("shape @level  n  misses  infeasible-where-full  median gap %  max gap %  "
          "median berth ms  median HiGHS ms")
    for key in sorted(groups):
        g = groups[key]
        gaps = [r["gap_percent"] for r in g]
        print(f"{key[0]} @{key[1]}  {len(g)}  {sum(r['miss'] for r in g)}  "
              f"{sum(r['infeasible_where_full'] for r in g)}  {statistics.median(gaps):.2f}  "
              f"{max(gaps):.2f}  {statistics.median(r['berth_wall_ms'] for r in g):.0f}  "
              f"{statistics.median(r['highs_ms'] for r in g):.0f}")
    gaps = [r["gap_percent"] for r in rows]
    full = [r for r in rows if r["level"].startswith("p")]
    print(f"instances: {len(rows)}; berth left out a replica the MIP placed: "
          f"{sum(r['miss'] for r in rows)}; placeable in full: {len(full)}, berth placed all "
          f"in {sum(not r['infeasible_where_full'] for r in full)}")
    print(f"cost gap to the optimum for berth's replicas: median {statistics.median(gaps):.2f}%, "
          f"mean {statistics.mean(gaps):.2f}%, max {max(gaps):.2f}%; over 3%: "
          f"{sum(g > 3 for g in gaps)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--berth", default="target/release/berth")
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--csv")
    ap.add_argument("--cache", help="folder remembering HiGHS's answers per instance")
    args = ap.parse_args()
    dirs = sorted((d for d in os.listdir(args.dir)
                   if os.path.exists(os.path.join(args.dir, d, "instance.json"))),
                  key=lambda d: (d.split("_")[0], int(d.split("_")[1][1:]), d))
    print("instance  replicas  unplaced P/S/D/E berth | MIP  berth $/day  optimum $/day  gap %  "
          "berth ms  HiGHS ms  notes")
    rows = []
    for d in dirs:
        r = compare(os.path.join(args.dir, d), args)
        rows.append(r)
        notes = []
        if r["miss"]:
            notes.append("MISS")
        if r["infeasible_where_full"]:
            notes.append("INFEASIBLE-WHERE-FULL")
        if r["status"] != "optimal/optimal":
            notes.append(f"HiGHS {r['status']}")
        if r["berth_fallback"] > r["mip_fallback_same"]:
            notes.append(f"fallback {r['berth_fallback']} > {r['mip_fallback_same']}")
        if args.exact:
            notes.append(f"exact {r['exact_unplaced']} {r['exact_wall_ms']:.0f} ms")
        print(f"{r['instance']}  {r['replicas']}  {r['berth_unplaced']} | {r['mip_unplaced']}  "
              f"{r['berth_cost']:.2f}  {r['same_placement_cost']:.2f}  {r['gap_percent']:.2f}  "
              f"{r['berth_wall_ms']:.0f}  {r['highs_ms']:.0f}  {' '.join(notes)}", flush=True)
    if args.csv and rows:
        with open(args.csv, "w", newline="") as out:
            wr = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
            wr.writeheader()
            wr.writerows(rows)
    if rows:
        summarise(rows)


if __name__ == "__main__":
    main()
