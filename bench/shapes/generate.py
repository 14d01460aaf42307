#!/usr/bin/env python3
"""Placement instances of the shapes bench/mip lacks, written as berth specs.

Each instance is a directory holding `instance.json` (the estate as plain data: targets, pools,
workloads, the instant) and `spec/` (the same estate in berth's language, over three files).
`compare.py` plans the spec through the `berth` command line and solves a MIP built from
`instance.json` alone: nothing here or there reads berth's own eligibility or candidate lists,
so the exact side is derived independently of the solver it judges.

Shapes (the issue's list of what the bench lacked):

  dense     every workload fits nearly every target: similar clusters of H100, A100 and L40S
  mig       MIG-partitioned pools beside whole-GPU ones; workloads asking MIG instances of a
            profile, or whole GPUs with a memory floor
  smallbig  many one-GPU replicas against a few eight-GPU ones on pools of 8 and 16
  prodexp   production that needs H100 competing with plentiful experiments that take anything
  moves     small pools, odd GPU sizes and widely spread prices: the cheapest plan moves two or
            more replicas at once from where a greedy order puts them

Levels: `pN` plants a full placement using N% of every pool and of the CPU and memory it needs
(N <= 100, so every replica can be placed: a berth plan that leaves one out has missed);
`oN` plants into capacities N% of the real ones (N > 100: over-subscribed, some replicas cannot
be placed and the class order decides which).

Usage: generate.py OUT_DIR [--shapes dense,mig,...] [--sizes 10x4,40x8] [--seeds 1-3]
                          [--levels p80,p100,o130]
"""

import argparse
import json
import math
import os
import random
import shutil

AT = "2025-06-04T10:00:00Z"
CLASSES = ("production", "staging", "development", "experiment")
# The accelerators used, as the standard library declares them: memory in GB, and the MIG
# profiles used here with their instances per device. A mismatch with `stdlib/gpu.berth` shows
# up as a berth placement the MIP calls illegal (compare.py checks every placement).
ACCELERATORS = {
    "H100": {"memory": 80, "mig": {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2}},
    "A100_80GB": {"memory": 80, "mig": {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2}},
    "L40S": {"memory": 48, "mig": {}},
}
MIG_MEMORY = {"1g.10gb": 10, "2g.20gb": 20, "3g.40gb": 40}
SHAPES = ("dense", "mig", "smallbig", "prodexp", "moves")


def units(pool):
    """GPU units a pool hands out: devices, or MIG instances of its profile."""
    if pool["mig"]:
        return pool["count"] * ACCELERATORS[pool["accelerator"]]["mig"][pool["mig"]]
    return pool["count"]


def eligible(wl, pool):
    """Whether a replica of `wl` can use `pool` (all targets are data-centre Kubernetes
    clusters here, so only the accelerator rules decide)."""
    acc = ACCELERATORS[pool["accelerator"]]
    if wl["accelerators"] is not None and pool["accelerator"] not in wl["accelerators"]:
        return False
    if wl["mig"] != pool["mig"]:
        return False
    memory = MIG_MEMORY[pool["mig"]] if pool["mig"] else acc["memory"]
    return wl["gpu_memory"] is None or memory >= wl["gpu_memory"]


# ---- targets per shape ----

def pool(name, accelerator, count, mig=None):
    return {"name": name, "accelerator": accelerator, "count": count, "mig": mig}


def targets_for(shape, rng, n):
    regions = max(2, n // 4)
    out = []
    for i in range(n):
        pools = []
        if shape == "dense":
            kinds = rng.sample(["H100", "A100_80GB", "L40S"], rng.choice([1, 2]))
            pools = [pool(f"p{k}", a, rng.choice([8, 16, 24, 32])) for k, a in enumerate(kinds)]
        elif shape == "mig":
            for k in range(rng.choice([1, 2, 3])):
                a = rng.choice(["H100", "A100_80GB"])
                mig = rng.choice([None, "1g.10gb", "2g.20gb", "3g.40gb"])
                pools.append(pool(f"p{k}", a, rng.choice([2, 4, 8]), mig))
        elif shape == "smallbig":
            pools = [pool(f"p{k}", "H100", rng.choice([8, 16]))
                     for k in range(rng.choice([1, 2]))]
        elif shape == "prodexp":
            pools = [pool("h100", "H100", rng.choice([4, 8, 16]))]
            if rng.random() < 0.7:
                pools.append(pool("l40s", "L40S", rng.choice([8, 16, 32])))
        elif shape == "moves":
            pools = [pool(f"p{k}", rng.choice(["H100", "L40S"]), rng.choice([2, 3, 4, 5, 6]))
                     for k in range(rng.choice([1, 2]))]
        spread = 4.0 if shape == "moves" else 2.0
        out.append({
            "name": f"t{i}",
            "region": f"r{i % regions}",
            "gpu_hour_cents": rng.randint(80, int(80 * spread * 2)),
            "pools": pools,
            "cpu": 0,  # set after planting
            "memory_gib": 0,
        })
    return out


# ---- workloads per shape ----

def workload_for(shape, rng, i, targets):
    cls = rng.choices(CLASSES, weights=(3, 2, 2, 3))[0]
    wl = {
        "name": f"w{i}", "class": cls, "kind": rng.choice(["service", "batch"]),
        "replicas": 0, "gpu": 1, "mig": None, "gpu_memory": None, "accelerators": None,
        "cpu": rng.choice([2, 4, 8, 16]), "memory_gib": rng.choice([8, 16, 32, 64]),
        "per_target": None, "fallback": None,
    }
    if shape == "dense":
        wl["gpu"] = rng.choice([1, 1, 2, 4])
        if rng.random() < 0.3:
            wl["accelerators"] = sorted(rng.sample(["H100", "A100_80GB", "L40S"], 2))
        if rng.random() < 0.2:
            wl["gpu_memory"] = 60
    elif shape == "mig":
        if rng.random() < 0.6:
            wl["mig"] = rng.choice(["1g.10gb", "2g.20gb", "3g.40gb"])
            wl["gpu"] = rng.choice([1, 1, 2])
        else:
            wl["gpu"] = rng.choice([1, 2, 4])
            wl["gpu_memory"] = rng.choice([None, 40, 80])
    elif shape == "smallbig":
        wl["gpu"] = 8 if rng.random() < 0.2 else 1
    elif shape == "prodexp":
        if cls in ("production", "staging"):
            wl["accelerators"] = ["H100"]
            wl["gpu"] = rng.choice([1, 2, 4])
        else:
            wl["gpu"] = rng.choice([1, 2])
    elif shape == "moves":
        wl["gpu"] = rng.choice([1, 2, 3])
    if wl["accelerators"] is None and wl["mig"] is None:
        # berth asks a GPU workload to say which accelerators it accepts: here, all of them.
        wl["accelerators"] = sorted(ACCELERATORS)
    if rng.random() < 0.15:
        wl["per_target"] = rng.choice([1, 2])
    if shape in ("dense", "prodexp") and rng.random() < 0.15:
        able = [t["name"] for t in targets if any(eligible(wl, p) for p in t["pools"])]
        wl["fallback"] = rng.choice(able) if len(able) > 1 else None
    return wl


def plant(shape, rng, n_workloads, targets, fill):
    """Workloads packed into `fill`% of every pool (a placement exists while fill <= 100).

    Returns the workloads and, per target, the CPU and memory the planted placement uses."""
    free = {(t["name"], p["name"]): units(p) * fill // 100 for t in targets for p in t["pools"]}
    cpu = {t["name"]: 0 for t in targets}
    mem = {t["name"]: 0 for t in targets}
    workloads = []
    attempts = 0
    while len(workloads) < n_workloads and attempts < n_workloads * 20:
        attempts += 1
        wl = workload_for(shape, rng, len(workloads), targets)
        want = rng.choice([1, 1, 2, 2, 3, 4, 6]) if wl["gpu"] < 8 else rng.choice([1, 2])
        spots = [(t, p) for t in targets for p in t["pools"] if eligible(wl, p)]
        rng.shuffle(spots)
        per_target = {}
        placed = 0
        for t, p in spots:
            while placed < want and free[(t["name"], p["name"])] >= wl["gpu"]:
                if wl["per_target"] and per_target.get(t["name"], 0) >= wl["per_target"]:
                    break
                free[(t["name"], p["name"])] -= wl["gpu"]
                per_target[t["name"]] = per_target.get(t["name"], 0) + 1
                cpu[t["name"]] += wl["cpu"]
                mem[t["name"]] += wl["memory_gib"]
                placed += 1
        if placed == 0:
            continue
        wl["replicas"] = placed
        wl["name"] = f"w{len(workloads)}"
        workloads.append(wl)
    return workloads, cpu, mem


def instance(shape, n_workloads, n_targets, seed, level):
    rng = random.Random(f"{shape}/{n_workloads}x{n_targets}/{seed}/{level}")
    fill = int(level[1:])
    targets = targets_for(shape, rng, n_targets)
    workloads, cpu, mem = plant(shape, rng, n_workloads, targets, fill)
    for t in targets:
        # CPU and memory: what the planted placement uses with some slack (so they bind in
        # some instances), scaled down like the pools when over-subscribed; never zero.
        slack = rng.uniform(1.0, 1.5)
        scale = 100 / fill if fill > 100 else 1.0
        t["cpu"] = max(4, math.ceil(cpu[t["name"]] * slack * scale))
        t["memory_gib"] = max(16, math.ceil(mem[t["name"]] * slack * scale))
        if fill > 100:
            for p in t["pools"]:
                p["count"] = max(1, p["count"] * 100 // fill)
    return {
        "shape": shape, "workloads_n": n_workloads, "targets_n": n_targets, "seed": seed,
        "level": level, "placeable": level.startswith("p"), "at": AT,
        "targets": targets, "workloads": workloads,
    }


# ---- the spec ----

def money(cents):
    return f"{cents // 100}.{cents % 100:02d}"


def render(inst):
    accelerators = sorted({p["accelerator"] for t in inst["targets"] for p in t["pools"]}
                          | {a for wl in inst["workloads"] for a in wl["accelerators"] or []})
    head = f"use std.gpu.{{{', '.join(accelerators)}}}\n"
    targets = [head]
    for t in inst["targets"]:
        lines = [
            f"target {t['name']} {{",
            "  class = datacenter",
            f"  runtime = kubernetes {{ context = \"{t['name']}\", namespace = \"ml\" }}",
            f"  region = \"{t['region']}\"",
            "  connectivity = connected",
            f"  cpu = {t['cpu']}",
            f"  memory = {t['memory_gib']}GiB",
        ]
        for p in t["pools"]:
            mig = f"  mig = \"{p['mig']}\"" if p["mig"] else ""
            lines.append(f"  pool {p['name']} {{ accelerator = {p['accelerator']}  "
                         f"count = {p['count']}{mig} }}")
        lines.append(f"  cost = {{ gpu_hour: {money(t['gpu_hour_cents'])} }}")
        lines.append("}")
        targets.append("\n".join(lines) + "\n")
    workloads = [head]
    placements = []
    for wl in inst["workloads"]:
        res = f"cpu = {wl['cpu']}  memory = {wl['memory_gib']}GiB  gpu = {wl['gpu']}"
        if wl["mig"]:
            res += f"  mig = \"{wl['mig']}\""
        if wl["gpu_memory"]:
            res += f"  gpu_memory = {wl['gpu_memory']}GB"
        lines = [
            f"workload {wl['name']} {{",
            "  release = \"1.0.0\"",
            f"  image = \"registry.example.com/bench/{wl['name']}:1.0.0\"",
            f"  kind = {wl['kind']}",
            f"  class = {wl['class']}",
            f"  identity = service_account(\"{wl['name']}\")",
            f"  replicas = {wl['replicas']}",
            f"  resources {{ {res} }}",
        ]
        if wl["accelerators"]:
            lines.append(f"  accelerators = [{', '.join(wl['accelerators'])}]")
        lines.append("  environments = [datacenter]")
        lines.append("}")
        workloads.append("\n".join(lines) + "\n")
        rules = []
        if wl["per_target"]:
            rules.append(f"spread = per_target({wl['per_target']})")
        if wl["fallback"]:
            rules.append(f"fallback = [{wl['fallback']}]")
        if rules:
            placements.append(f"placement {wl['name']} {{ {'  '.join(rules)} }}\n")
    return {
        "targets.berth": "\n".join(targets),
        "workloads.berth": "\n".join(workloads),
        "placement.berth": "\n".join(placements) or "// no placement rules\n",
    }


def parse_range(text):
    lo, _, hi = text.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--sizes", default="10x4,40x8,100x16,300x40")
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--levels", default="p80,p100,o130")
    args = ap.parse_args()
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    for shape in args.shapes.split(","):
        if shape not in SHAPES:
            ap.error(f"unknown shape `{shape}` (known: {', '.join(SHAPES)})")
        for size in args.sizes.split(","):
            w, _, t = size.partition("x")
            for seed in parse_range(args.seeds):
                for level in args.levels.split(","):
                    if level[:1] not in "po" or not level[1:].isdigit():
                        ap.error(f"bad level `{level}` (pN or oN)")
                    inst = instance(shape, int(w), int(t), seed, level)
                    name = f"{shape}_w{w}_t{t}_s{seed}_{level}"
                    spec = os.path.join(args.out, name, "spec")
                    os.makedirs(spec)
                    with open(os.path.join(args.out, name, "instance.json"), "w") as fh:
                        json.dump(inst, fh, indent=1)
                    for file, text in render(inst).items():
                        with open(os.path.join(spec, file), "w") as fh:
                            fh.write(text)


if __name__ == "__main__":
    main()
