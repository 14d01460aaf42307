"""The lexicographic MIP both placement benches solve with HiGHS (`bench/mip/compare.py` on
the engine's exported problem, `bench/shapes/compare.py` on instances it builds itself).

A model offers: `n_x` integer columns (replicas per option) with upper bounds `ub`, then
`binaries` (0/1 columns after them), `rows` as (lower, upper, {column: coefficient}), the stage
objectives `stages()` as coefficients per x column, in the order
CLASSES (minimise -placed, class by class), FALLBACK, LATENCY, COST; `class_totals()`, the
replicas declared per class; and `workload_cols(w)`, the x columns of workload `w`.
"""

import time

import highspy
import numpy as np

INF = highspy.kHighsInf
# Workload classes, highest priority first (berth's placement order).
CLASSES = ("Production", "Staging", "Development", "Experiment")
# Index of the first stage after the unplaced ones.
FALLBACK, LATENCY, COST = len(CLASSES), len(CLASSES) + 1, len(CLASSES) + 2


def evaluate(model, x):
    """Stage values: unplaced replicas per class, fallback replicas, latency, cost."""
    values = [float(np.dot(s, x)) for s in model.stages()]
    for k, total in enumerate(model.class_totals()):
        values[k] += total
    return values


def solve(model, time_limit, counts=None, stop_after=None):
    """Lexicographic MIP; returns (stage values, x, seconds, status).

    With `counts` (replicas per workload), every workload places exactly that many: the
    cheapest way to place what berth placed."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 1e-6)
    h.setOptionValue("threads", 1)
    n = model.n_x + len(model.binaries)
    lb = np.zeros(n)
    ub = np.array(model.ub + [1] * len(model.binaries), dtype=float)
    h.addVars(n, lb, ub)
    h.changeColsIntegrality(
        n, np.arange(n, dtype=np.int32),
        np.array([highspy.HighsVarType.kInteger] * n))
    starts, idx, vals, lower, upper = [], [], [], [], []
    for lo, up, coefs in model.rows:
        starts.append(len(idx))
        for c in sorted(coefs):
            idx.append(c)
            vals.append(float(coefs[c]))
        lower.append(lo)
        upper.append(float(up))
    if model.rows:
        h.addRows(len(model.rows), np.array(lower), np.array(upper), len(idx),
                  np.array(starts, dtype=np.int32), np.array(idx, dtype=np.int32),
                  np.array(vals))
    if counts is not None:
        for w, count in enumerate(counts):
            cs = model.workload_cols(w)
            if cs:
                h.addRow(count, count, len(cs), np.array(cs, dtype=np.int32),
                         np.ones(len(cs)))
    all_cols = np.arange(n, dtype=np.int32)
    stages = model.stages()
    started = time.perf_counter()
    status = "optimal"
    x = np.zeros(model.n_x)
    for k, coefs in enumerate(stages):
        if stop_after is not None and k >= stop_after:
            break
        full = np.array(list(coefs) + [0.0] * len(model.binaries))
        if (k > 0 and not np.any(full)) or (counts is not None and k < FALLBACK):
            continue
        h.changeColsCost(n, all_cols, full)
        h.setOptionValue("time_limit", max(1.0, time_limit - (time.perf_counter() - started)))
        h.run()
        ms = h.getModelStatus()
        if ms != highspy.HighsModelStatus.kOptimal:
            status = h.modelStatusToString(ms)
            if h.getInfo().primal_solution_status != 2:  # no feasible point
                break
        x = np.round(np.array(h.getSolution().col_value[:model.n_x]))
        best = float(np.dot(coefs, x))
        if k < len(stages) - 1:
            # Keep this stage's optimum (with a hair of slack for the continuous ones).
            slack = 0.5 if k < LATENCY else 1e-6 * max(1.0, abs(best))
            nz = [c for c in range(model.n_x) if coefs[c] != 0]
            h.addRow(-INF, best + slack, len(nz), np.array(nz, dtype=np.int32),
                     np.array([coefs[c] for c in nz]))
        if status != "optimal":
            break
    seconds = time.perf_counter() - started
    return evaluate(model, x), x, seconds, status
