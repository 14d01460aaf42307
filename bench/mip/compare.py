#!/usr/bin/env python3
"""berth's placement heuristic against an exact MIP (HiGHS), on the same instances.

Reads the instances `compiler/examples/mip_instances.rs` exported (the assignment problem as
berth's engine sees it after eligibility and policy, plus berth's own answer and time), solves
each exactly with HiGHS, and prints one row per instance and a summary.

The MIP optimises, lexicographically (each stage keeps the optimum of the ones before it),
what berth's heuristic optimises:

  1. replicas left unplaced (fewest), class by class: production, then staging, development,
     experiment (berth places higher classes first and never unplaces one for a lower one),
  2. replicas on `fallback` targets (fewest: berth uses them only when nothing else fits),
  3. data latency, in ms per replica, of the workloads whose first preference is
     `lowest(data_latency)`,
  4. total cost per day (the figure compared).

Constraints, all of berth's hard ones: integer replicas per (target, pool) option; GPU units
per pool; CPU and memory per target; GPU caps (quotas, entitlement caps, window limits in
effect); `per_target(n)` and `per_region(n)` spread; isolation (two isolated workloads never
share a pool). Berth's own answer is checked against the same constraints first, so an export
that missed a constraint berth respects would show up as a violation.

Each instance also answers the issue's question literally: did the MIP place every replica,
and did berth? (Instances exported with a `pN` level are cut to be placeable; see
`compiler/examples/mip_instances.rs`.)

Usage: compare.py INSTANCE_DIR [--time-limit SECONDS] [--csv FILE]
       compare.py INSTANCE_DIR --write-counts DIR   (per instance, the replicas per workload the
                                                     MIP places, for cutting placeable instances)
"""

import argparse
import csv
import glob
import hashlib
import json
import os
import statistics
import sys

import numpy as np

from lexmip import CLASSES, COST, FALLBACK, INF, LATENCY, evaluate, solve

MICROS = 1_000_000


class Model:
    """The instance as columns (one integer per option) and rows (the constraints)."""

    def __init__(self, inst):
        self.inst = inst
        self.cols = []  # (workload, option index) per integer column
        self.col_of = {}
        for w, wl in enumerate(inst["workloads"]):
            for i, _ in enumerate(wl["options"]):
                self.col_of[(w, i)] = len(self.cols)
                self.cols.append((w, i))
        self.n_x = len(self.cols)
        self.ub = [inst["workloads"][w]["replicas"] for w, _ in self.cols]
        self.binaries = []  # isolation indicator columns, after the x columns
        self.rows = []  # (lower, upper, {col: coef})
        self._constraints()

    def workload_cols(self, w):
        return [self.col_of[(w, i)] for i in range(len(self.inst["workloads"][w]["options"]))]

    def class_totals(self):
        return [sum(wl["replicas"] for wl in self.inst["workloads"] if wl["class"] == cls)
                for cls in CLASSES]

    def opt(self, c):
        w, i = self.cols[c]
        return self.inst["workloads"][w]["options"][i]

    def _constraints(self):
        inst = self.inst
        wls = inst["workloads"]
        regions = [t["region"] for t in inst["targets"]]
        pool_rows, cpu_rows, mem_rows, cap_rows = {}, {}, {}, {}
        for c, (w, i) in enumerate(self.cols):
            wl, o = wls[w], wls[w]["options"][i]
            if o["pool"] is not None and wl["gpu_units"] > 0:
                pool_rows.setdefault(o["pool"], {})[c] = wl["gpu_units"]
            if wl["cpu_millis"]:
                cpu_rows.setdefault(o["target"], {})[c] = wl["cpu_millis"]
            if wl["memory"]:
                mem_rows.setdefault(o["target"], {})[c] = wl["memory"]
            for cap in wl["caps"]:
                cap_rows.setdefault(cap, {})[c] = wl["gpu_units"]
        for p, coefs in sorted(pool_rows.items()):
            self.rows.append((-INF, inst["pools"][p], coefs))
        for t, coefs in sorted(cpu_rows.items()):
            self.rows.append((-INF, inst["targets"][t]["cpu_millis"], coefs))
        for t, coefs in sorted(mem_rows.items()):
            self.rows.append((-INF, inst["targets"][t]["memory"], coefs))
        for cap, coefs in sorted(cap_rows.items()):
            self.rows.append((-INF, inst["caps"][cap], coefs))
        # Per workload: at most `replicas` placed; spread.
        for w, wl in enumerate(wls):
            cs = [self.col_of[(w, i)] for i in range(len(wl["options"]))]
            if not cs:
                continue
            self.rows.append((-INF, wl["replicas"], {c: 1 for c in cs}))
            for key, limit in (("target", wl["per_target"]), ("region", wl["per_region"])):
                if limit is None:
                    continue
                groups = {}
                for c in cs:
                    t = self.opt(c)["target"]
                    groups.setdefault(t if key == "target" else regions[t], {})[c] = 1
                for g in sorted(groups):
                    if sum(self.ub[c] for c in groups[g]) > limit:
                        self.rows.append((-INF, limit, groups[g]))
        # Isolation: y[w,p] = 1 when w uses pool p; partners never both.
        indicator = {}

        def y(w, p):
            if (w, p) not in indicator:
                col = self.n_x + len(self.binaries)
                indicator[(w, p)] = col
                self.binaries.append((w, p))
                uses = {c: 1 for c in range(self.n_x)
                        if self.cols[c][0] == w and self.opt(c)["pool"] == p}
                uses[col] = -wls[w]["replicas"]
                self.rows.append((-INF, 0, uses))
            return indicator[(w, p)]

        pools_of = {}
        for c, (w, _) in enumerate(self.cols):
            p = self.opt(c)["pool"]
            if p is not None:
                pools_of.setdefault(w, set()).add(p)
        for w, wl in enumerate(wls):
            for v in wl["isolate_from"]:
                if v <= w:
                    continue
                for p in sorted(pools_of.get(w, set()) & pools_of.get(v, set())):
                    self.rows.append((-INF, 1, {y(w, p): 1, y(v, p): 1}))

    # The stage objectives, as coefficients per x column.
    def placed(self, cls):  # minimising -placed = unplaced - replicas of the class
        wls = self.inst["workloads"]
        return [-1.0 if wls[w]["class"] == cls else 0.0 for w, _ in self.cols]

    def stages(self):
        return [self.placed(c) for c in CLASSES] + [self.fallback(), self.latency(), self.cost()]

    def fallback(self):
        return [1.0 if self.opt(c)["fallback"] else 0.0 for c in range(self.n_x)]

    def latency(self):
        out = []
        for c, (w, _) in enumerate(self.cols):
            wl = self.inst["workloads"][w]
            first = wl["prefer"][0] == "data_latency"
            value = self.opt(c)["objectives"][0]
            out.append(value / MICROS if first and value < 2**62 else 0.0)
        return out

    def cost(self):
        return [self.opt(c)["cost_per_day"] / MICROS for c in range(self.n_x)]

    def violations(self, x):
        """Constraints a solution (x per column) breaks, for checking berth's answer."""
        bad = []
        for lo, up, coefs in self.rows:
            if any(c >= self.n_x for c in coefs):
                continue
            s = sum(v * x[c] for c, v in coefs.items())
            if s > up + 1e-6:
                bad.append((s, up))
        # Isolation on berth's answer, directly.
        wls = self.inst["workloads"]
        used = {}
        for c in range(self.n_x):
            if x[c] > 0 and self.opt(c)["pool"] is not None:
                used.setdefault(self.cols[c][0], set()).add(self.opt(c)["pool"])
        for w, wl in enumerate(wls):
            for v in wl["isolate_from"]:
                if used.get(w, set()) & used.get(v, set()):
                    bad.append(("isolation", w, v))
        return bad


def berth_x(model):
    x = np.zeros(model.n_x)
    for w, wl in enumerate(model.inst["workloads"]):
        for i, n in wl["berth"]:
            x[model.col_of[(w, i)]] = n
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--csv")
    ap.add_argument("--write-counts")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.dir, "*.json")),
                   key=lambda f: (len(f), f))
    if args.write_counts:
        write_counts(files, args.write_counts, args.time_limit)
        return
    print("instance  options  replicas  unplaced P/S/D/E berth | MIP  all placed berth | MIP  "
          "berth $/day  same-placement optimum $/day  gap %  full optimum $/day  berth ms  "
          "HiGHS ms  ratio  notes")
    rows = []
    for f in files:
        inst = json.load(open(f))
        model = Model(inst)
        bx = berth_x(model)
        bad = model.violations(bx)
        if bad:
            print(f"{f}: berth's answer breaks the exported constraints: {bad[:3]}",
                  file=sys.stderr)
            sys.exit(2)
        b = evaluate(model, bx)
        m, _, seconds, status = solve(model, args.time_limit)
        counts = [sum(n for _, n in wl["berth"]) for wl in inst["workloads"]]
        s_, _, _, s_status = solve(model, args.time_limit, counts)
        bu, mu = [round(v) for v in b[:FALLBACK]], [round(v) for v in m[:FALLBACK]]
        notes = []
        if status != "optimal" or s_status != "optimal":
            notes.append(f"HiGHS: {status}/{s_status}")
        # Worse at the first class that differs: berth left out a replica the MIP placed.
        miss = bu > mu
        mip_all, berth_all = sum(mu) == 0, sum(bu) == 0
        if mip_all and not berth_all:
            notes.append("INFEASIBLE-WHERE-MIP-PLACES-ALL")
        if miss:
            notes.append("MISS")
        if not same(b, s_):
            notes.append("berth better on fallback/latency" if
                         b[FALLBACK:COST] < s_[FALLBACK:COST] else "worse on fallback/latency")
        gap = pct(b[COST], s_[COST])
        full_gap = pct(b[COST], m[COST]) if same(b, m) and bu == mu else None
        berth_ms = inst["berth_assign_ms"]
        highs_ms = seconds * 1e3
        row = {
            "instance": os.path.basename(f)[:-5],
            "workloads": inst["workloads_n"], "targets": inst["targets_n"],
            "seed": inst["seed"], "capacity": inst["capacity_percent"],
            "placeable": bool(inst.get("placeable", False)),
            "options": model.n_x,
            "replicas": sum(wl["replicas"] for wl in inst["workloads"]),
            "berth_unplaced": "/".join(map(str, bu)), "mip_unplaced": "/".join(map(str, mu)),
            "berth_cost": b[COST], "same_placement_cost": s_[COST], "gap_percent": gap,
            "mip_cost": m[COST], "full_gap_percent": full_gap,
            "comparable": same(b, s_), "miss": miss,
            "mip_all": mip_all, "berth_all": berth_all,
            "berth_assign_ms": berth_ms, "berth_solve_ms": inst["berth_solve_ms"],
            "highs_ms": highs_ms, "status": status,
        }
        rows.append(row)
        print("  ".join([
            row["instance"], str(model.n_x), str(row["replicas"]),
            f"{row['berth_unplaced']} | {row['mip_unplaced']}",
            f"{yes(berth_all)} | {yes(mip_all)}",
            f"{b[COST]:.2f}", f"{s_[COST]:.2f}", f"{gap:.2f}", f"{m[COST]:.2f}",
            f"{berth_ms:.2f}", f"{highs_ms:.0f}", f"{highs_ms / max(berth_ms, 1e-3):.0f}x",
            " ".join(notes),
        ]), flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as out:
            wr = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
            wr.writeheader()
            wr.writerows(rows)
    summarise(rows)


def problem_digest(inst):
    """The instance's problem, without berth's answer and timing: what the counts depend on."""
    problem = {k: v for k, v in inst.items() if not k.startswith("berth")}
    problem["workloads"] = [{k: v for k, v in wl.items() if not k.startswith("berth")}
                            for wl in inst["workloads"]]
    text = json.dumps(problem, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_counts(files, out, time_limit):
    """Per placeable instance, the replicas per workload of the MIP's placement optimum.

    Counts already in `out` for the same problem (its digest beside them) are kept, not solved
    again: solving them is most of the bench's time, and the instances are deterministic."""
    os.makedirs(out, exist_ok=True)
    for f in files:
        inst = json.load(open(f))
        if not inst.get("placeable"):
            continue
        target = os.path.join(out, os.path.basename(f))
        digest_file = target + ".digest"
        digest = problem_digest(inst)
        if os.path.exists(target) and os.path.exists(digest_file):
            with open(digest_file) as fh:
                if fh.read().strip() == digest:
                    continue
        model = Model(inst)
        _, x, _, status = solve(model, time_limit, stop_after=FALLBACK)
        if status != "optimal":
            print(f"{f}: HiGHS {status}; counts not written", file=sys.stderr)
            continue
        counts = [0] * len(inst["workloads"])
        for c, (w, _) in enumerate(model.cols):
            counts[w] += int(x[c])
        with open(target, "w") as fh:
            json.dump(counts, fh)
        with open(digest_file, "w") as fh:
            fh.write(digest + "\n")


def yes(flag):
    return "yes" if flag else "no"


def same(a, b):
    """Equal on everything ranked before cost (unplaced, fallback, latency)."""
    return all(abs(a[k] - b[k]) < 0.5 for k in range(LATENCY)) and \
        abs(a[LATENCY] - b[LATENCY]) <= 1e-6 * max(1.0, abs(b[LATENCY]))


def pct(value, best):
    if best > 0:
        return (value - best) / best * 100
    return 0.0 if value <= 0 else float("inf")


def summarise(rows):
    print()
    misses = [r for r in rows if r["miss"]]
    print(f"instances: {len(rows)}; HiGHS optimal on all stages: "
          f"{sum(r['status'] == 'optimal' for r in rows)}; berth left out a replica the MIP "
          f"placed (lexicographically by class): {len(misses)}")
    groups = {}
    for r in rows:
        key = (r["workloads"], r["targets"], r["placeable"], r["capacity"])
        groups.setdefault(key, []).append(r)
    print("size (w x t @capacity)  n  median gap %  max gap %  misses  MIP all  berth all  "
          "median berth ms  median HiGHS ms  median ratio")
    for key in sorted(groups):
        g = groups[key]
        gaps = [r["gap_percent"] for r in g]
        ratio = [r["highs_ms"] / max(r["berth_assign_ms"], 1e-3) for r in g]
        level = ("p" if key[2] else "") + str(key[3])
        print(f"{key[0]}x{key[1]} @{level}%  {len(g)}  {statistics.median(gaps):.2f}  "
              f"{max(gaps):.2f}  {sum(r['miss'] for r in g)}  "
              f"{sum(r['mip_all'] for r in g)}  {sum(r['mip_all'] and r['berth_all'] for r in g)}  "
              f"{statistics.median(r['berth_assign_ms'] for r in g):.2f}  "
              f"{statistics.median(r['highs_ms'] for r in g):.0f}  "
              f"{statistics.median(ratio):.0f}x")
    all_mip = [r for r in rows if r["mip_all"]]
    print(f"the MIP placed every replica in {len(all_mip)} instances; berth did too in "
          f"{sum(r['berth_all'] for r in all_mip)}")
    gaps = [r["gap_percent"] for r in rows]
    print(f"gap to the same-placement optimum: median {statistics.median(gaps):.2f}%, "
          f"mean {statistics.mean(gaps):.2f}%, max {max(gaps):.2f}%")
    full = [r["full_gap_percent"] for r in rows if r["full_gap_percent"] is not None]
    if full:
        print(f"gap to the full optimum where berth placed exactly as much: {len(full)} "
              f"instances, median {statistics.median(full):.2f}%, max {max(full):.2f}%")


if __name__ == "__main__":
    main()
