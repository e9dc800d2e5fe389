"""Planner inputs measured by a run: the ``report.json`` that ``python -m training.telemetry.report`` writes.

What a report gives (keys as in ``docs/goodput.md``):

* ``steps`` = ``final_step``; ``step_s`` = ``checkpoint.step_s_without_checkpoints`` (else productive / steps);
* ``interval`` = ``advice.current_interval_steps``; ``checkpoint_mode`` = ``checkpoint.mode``;
* stall and write: the report's ``write_s`` spans ``ckpt_begin`` -> commit, so it holds the stall. Async:
  ``stall_s`` = ``stall_s_p50``, ``write_s`` = ``write_s_p50 - stall_s_p50`` (the background part). Sync: the loop
  waits for everything, so ``write_s`` = ``write_s_p50`` and ``stall_s`` = what the stall has beyond it;
* per recovering layer, ``restart`` = p50 / p95 of (recovery - detection - one step) over its faults: fault ->
  first new step, less the detection and the first step, which leaves restart + restore; ``restore_s`` is
  therefore 0 (a report does not time the restore on its own);
* per fault class (``kind`` -> class: exception / oom / comm -> ``exception``, hang -> ``hang``, sigkill ->
  ``process_crash``) and layer, the median detection latency;
* the run's own fault mix and MTBF (wall / faults), used only when asked (``--report-faults``): injected faults
  are a test schedule, not a failure rate.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from training.whatif.params import LAYERS, Dist, FaultClass, LayerParams, Scenario, ScenarioError

REQUIRED_KEYS = ("final_step", "wall_seconds", "productive_seconds", "checkpoint", "faults", "advice")
#: A fault ``kind`` of the trainer's injector -> the planner's fault class.
KIND_CLASS = {
    "exception": "exception",
    "oom": "exception",
    "comm": "exception",
    "hang": "hang",
    "sigkill": "process_crash",
    "node-loss": "node_loss",
}
#: A class the default mix does not have: the worker process dies (SIGKILL, a segfault); in-process cannot help.
PROCESS_CRASH = FaultClass("process_crash", {"ft_launcher": 0.0, "job": 0.0})


def load_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a report.json; the error says which keys are missing from anything else."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"--from-report: {p} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"--from-report: {p} is not JSON ({exc})") from None
    missing = [k for k in REQUIRED_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise ScenarioError(
            f"--from-report: {p} is not a report.json of python -m training.telemetry.report "
            f"(missing {', '.join(missing)})"
        )
    return data


@dataclass(frozen=True)
class Calibration:
    """What a report measured: Scenario field overrides, and the run's own fault mix and rate."""

    overrides: dict[str, Any]
    observed_classes: tuple[FaultClass, ...]
    measured_mtbf_s: float | None
    notes: list[str] = field(default_factory=list)

    def apply(self, sc: Scenario, *, faults: bool = False, report_nodes: int = 1) -> Scenario:
        """``sc`` with the measured timings; with ``faults`` also the run's fault mix and rate (per node:
        the run's MTBF x ``report_nodes``) unless ``sc`` already has a node MTBF."""
        out = replace(sc, **self.overrides)
        if faults and self.observed_classes:
            mtbf = sc.node_mtbf_hours
            if mtbf is None and self.measured_mtbf_s:
                mtbf = self.measured_mtbf_s * report_nodes / 3600
            out = replace(out, fault_classes=self.observed_classes, node_mtbf_hours=mtbf)
        return out


def calibrate(report: dict[str, Any], base: Scenario) -> Calibration:
    """The planner inputs a report measured (see the module docstring); ``base`` supplies what it does not."""
    ck = report["checkpoint"] or {}
    notes: list[str] = []
    ov: dict[str, Any] = {}
    steps = report.get("final_step")
    if isinstance(steps, int) and steps > 0:
        ov["steps"] = steps
    step_s = ck.get("step_s_without_checkpoints")
    if not step_s and steps and report.get("productive_seconds"):
        step_s = report["productive_seconds"] / steps
        notes.append("step_s: productive seconds / final step (no step gap without a checkpoint)")
    if not step_s:
        raise ScenarioError("the report has no step time (no steps ran?)")
    ov["step_s"], ov["step_s_by_nodes"] = float(step_s), None
    interval = (report.get("advice") or {}).get("current_interval_steps")
    if isinstance(interval, int) and interval > 0:
        ov["interval"] = interval
    mode = ck.get("mode")
    stall, write = ck.get("stall_s_p50"), ck.get("write_s_p50")
    if mode in ("async", "sync"):
        ov["checkpoint_mode"] = mode
    if stall is not None and write is not None:
        if mode == "sync":
            ov["stall_s"], ov["write_s"] = max(0.0, stall - write), float(write)
        else:
            ov["stall_s"], ov["write_s"] = float(stall), max(0.0, write - stall)
        ov["first_stall_s"] = None
    else:
        notes.append("no committed checkpoint: stall and write times keep their defaults")
    faults = [f for f in report["faults"] if isinstance(f, dict)]
    ov["layers"] = _layers(faults, float(step_s), base, notes)
    if any(layer in report.get("recovery_s_by_layer", {}) for layer in LAYERS):
        ov["restore_s"] = Dist(0.0)
    observed = _classes(faults, base)
    known = {c.name: c for c in observed}
    ov["fault_classes"] = tuple(
        replace(c, detection_s={**c.detection_s, **known[c.name].detection_s}) if c.name in known else c
        for c in base.fault_classes
    )
    wall = report.get("wall_seconds") or 0.0
    mtbf = wall / len(faults) if faults and wall > 0 else None
    return Calibration(ov, observed, mtbf, notes)


def _layers(faults: list[dict[str, Any]], step_s: float, base: Scenario, notes: list[str]) -> dict[str, LayerParams]:
    out = dict(base.layers)
    for layer in LAYERS:
        # the simulation adds the job's start-up after a job-layer restart: the measured recovery holds it already
        startup = base.startup if layer == "job" else 0.0
        xs = [
            max(0.0, f["recovery_s"] - (f.get("detection_s") or 0.0) - step_s - startup)
            for f in faults
            if f.get("layer") == layer and isinstance(f.get("recovery_s"), int | float)
        ]
        if xs:
            p50, p95 = float(np.percentile(xs, 50)), float(np.percentile(xs, 95))
            out[layer] = replace(base.layers[layer], restart=Dist(p50, max(p95, p50)))
            notes.append(f"{layer} restart: p50 {p50:.2f} s, p95 {p95:.2f} s over {len(xs)} fault(s)")
    return out


def _classes(faults: list[dict[str, Any]], base: Scenario) -> tuple[FaultClass, ...]:
    """The run's fault mix: one class per mapped kind, share = its fraction of the faults, measured detection."""
    by_class: dict[str, list[dict[str, Any]]] = {}
    for f in faults:
        name = KIND_CLASS.get(str(f.get("kind")))
        if name:
            by_class.setdefault(name, []).append(f)
    total = sum(len(v) for v in by_class.values())
    defaults = {c.name: c for c in (*base.fault_classes, PROCESS_CRASH)}
    out = []
    for name, fs in sorted(by_class.items()):
        detection = dict(defaults[name].detection_s) if name in defaults else {"job": 0.0}
        for layer in LAYERS:
            xs = [f["detection_s"] for f in fs if f.get("layer") == layer and _finite(f.get("detection_s"))]
            if xs:
                detection[layer] = float(statistics.median(xs))
        out.append(FaultClass(name, detection, share=len(fs) / total))
    return tuple(out)


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
