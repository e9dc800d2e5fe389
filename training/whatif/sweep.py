"""Simulated sweeps: goodput over checkpoint intervals, over recovery modes, and the recommendation of both.

Every point of a sweep runs the same trials (same seeds, so the same faults): differences between points come from
the interval or the mode, not from luck. The best interval is the one with the highest mean training goodput (ties go
to the larger p5), among intervals no shorter than the background write (see :mod:`training.whatif.interval`). The
mean, not the median: when a run expects only a few faults, the median trial may have none, and its best interval
is "never checkpoint".
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from platform_config import MODE_LAYERS, ProjectConfig, RecoveryMode
from training.whatif.calibrate import calibrate
from training.whatif.engine import run_trials
from training.whatif.inputs import from_config
from training.whatif.interval import min_interval_steps, optimum
from training.whatif.params import LLAMA3_NODE_MTBF_HOURS, Scenario

#: Sweep points per interval sweep (geometric between the smallest useful interval and the run length).
DEFAULT_POINTS = 13


def interval_grid(sc: Scenario, points: int = DEFAULT_POINTS) -> list[int]:
    """Intervals to try: a geometric grid over ``[min_interval_steps, steps]`` plus the configured, Young's and
    Daly's intervals."""
    lo, hi = min_interval_steps(sc), sc.steps
    grid = {lo, hi}
    if hi > lo and points > 2:
        ratio = (hi / lo) ** (1 / (points - 1))
        grid |= {min(hi, max(lo, round(lo * ratio**i))) for i in range(points)}
    opt = optimum(sc)
    grid |= {int(opt["young_interval_steps"]), int(opt["daly_interval_steps"])}  # type: ignore[arg-type]
    if lo <= sc.interval <= hi:
        grid.add(sc.interval)
    return sorted(grid)


def sweep(sc: Scenario, intervals: list[int], trials: int | None = None) -> list[dict[str, Any]]:
    """Goodput percentiles at each interval (everything else as in ``sc``)."""
    rows = []
    for k in intervals:
        s = run_trials(sc.with_(interval=k), trials)
        tg, ig, wall = s.training_goodput, s.infrastructure_goodput, s.time_to_target_s
        rows.append(
            {
                "interval_steps": k,
                "training_goodput_p5": tg["p5"],
                "training_goodput_p50": tg["p50"],
                "training_goodput_p95": tg["p95"],
                "training_goodput_mean": tg["mean"],
                "infrastructure_goodput_p50": ig["p50"],
                "infrastructure_goodput_mean": ig["mean"],
                "time_to_target_s_p50": wall["p50"],
            }
        )
    return rows


def best_interval(rows: list[dict[str, Any]]) -> int:
    """The interval with the highest mean training goodput (then the highest p5, then the smaller interval)."""
    best = max(rows, key=lambda r: (r["training_goodput_mean"], r["training_goodput_p5"], -r["interval_steps"]))
    return int(best["interval_steps"])


def compare_modes(sc: Scenario, trials: int | None = None) -> list[dict[str, Any]]:
    """Every recovery mode at the configured interval and at that mode's own Daly interval."""
    rows = []
    for mode in RecoveryMode:
        m = sc.with_(mode=mode.value, checkpoint_mode=None)
        daly = int(optimum(m)["daly_interval_steps"])  # type: ignore[arg-type]
        at_configured = run_trials(m, trials) if sc.interval else None
        at_daly = run_trials(m.with_(interval=daly), trials)
        row: dict[str, Any] = {
            "mode": mode.value,
            "checkpoint_mode": m.ckpt_mode,
            "layers": list(m.layers_on),
            "daly_interval_steps": daly,
            "training_goodput_p50_at_daly": at_daly.training_goodput["p50"],
        }
        if at_configured is not None:
            tg = at_configured.training_goodput
            row |= {
                "interval_steps": sc.interval,
                "training_goodput_p5": tg["p5"],
                "training_goodput_p50": tg["p50"],
                "training_goodput_p95": tg["p95"],
                "infrastructure_goodput_p50": at_configured.infrastructure_goodput["p50"],
                "time_to_target_s_p50": at_configured.time_to_target_s["p50"],
            }
        rows.append(row)
    return rows


def recommend(sc: Scenario, *, trials: int = 40, points: int = 7) -> dict[str, Any]:
    """The recovery mode and interval with the highest mean training goodput for ``sc``'s cluster (ties: the
    higher infrastructure goodput, then ``sc.mode``).

    Each mode gets an interval sweep of ``points`` points and ``trials`` trials per point (small: this runs inside
    the report). Modes that turn on the same layers with the same checkpoint mode are simulated once.
    """
    results: dict[tuple[Any, ...], dict[str, Any]] = {}
    by_mode: dict[str, dict[str, Any]] = {}
    for mode in RecoveryMode:
        m = sc.with_(mode=mode.value, checkpoint_mode=None)
        layers = MODE_LAYERS[mode]
        key = (layers.checkpoint_mode, layers.inprocess, layers.ft_launcher, layers.memory_tier)
        if key not in results:
            rows = sweep(m, interval_grid(m, points), trials)
            k = best_interval(rows)
            best = next(r for r in rows if r["interval_steps"] == k)
            results[key] = {
                "interval_steps": k,
                "training_goodput_p50": best["training_goodput_p50"],
                "training_goodput_mean": best["training_goodput_mean"],
                "infrastructure_goodput_p50": best["infrastructure_goodput_p50"],
                "infrastructure_goodput_mean": best["infrastructure_goodput_mean"],
            }
        by_mode[mode.value] = results[key]

    def rank(name: str) -> tuple[float, float, bool, int]:
        """Best mean training goodput, then infrastructure goodput, then the configured mode, then the order."""
        r = by_mode[name]
        return (r["training_goodput_mean"], r["infrastructure_goodput_mean"], name == sc.mode, -_order(name))

    mode = max(by_mode, key=rank)
    return {
        "mode": mode,
        **by_mode[mode],
        "nodes": sc.nodes,
        "gpus_per_node": sc.gpus_per_node,
        "steps": sc.steps,
        "node_mtbf_hours": sc.node_mtbf_hours,
        "cluster_mtbf_hours": sc.cluster_mtbf_s / 3600 if math.isfinite(sc.cluster_mtbf_s) else None,
        "trials": trials,
        "by_mode": by_mode,
    }


def _order(mode: str) -> int:
    return [m.value for m in RecoveryMode].index(mode)


def for_report(report: dict[str, Any], cfg: ProjectConfig, *, trials: int = 40, points: int = 7) -> dict[str, Any]:
    """The recommendation for ``cfg``'s cluster (nodes, GPUs, steps, budgets, timeouts) with the step, checkpoint
    and restart times a run's ``report`` measured (:mod:`training.whatif.calibrate`).

    The node MTBF is ``observability.node_mtbf_hours`` (by default Llama 3's), else Llama 3's.
    """
    base = from_config(cfg)
    llama3 = "Llama 3 (arXiv 2407.21783, Table 5): 2,048 nodes x 54 days / 419 interruptions"
    source = "observability.node_mtbf_hours"
    if base.node_mtbf_hours is None or base.node_mtbf_hours == LLAMA3_NODE_MTBF_HOURS:
        base = replace(base, node_mtbf_hours=LLAMA3_NODE_MTBF_HOURS)
        source = f"{source} default: {llama3}" if cfg.observability.node_mtbf_hours else llama3
    measured = calibrate(report, base).apply(base)
    sc = replace(measured, steps=base.steps, interval=base.interval).validate()
    return {
        **recommend(sc, trials=trials, points=points),
        "node_mtbf_source": source,
        "configured_interval_steps": base.interval,
        "from_run": {
            "step_s": sc.step_time,
            "stall_s": sc.stall_s,
            "write_s": sc.write_time,
            "checkpoint_mode": measured.checkpoint_mode,
        },
    }
