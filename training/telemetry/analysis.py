"""What a run's event log comes to (:class:`RunAnalysis`): filled in place by :func:`training.telemetry.goodput.analyze`
and :mod:`training.telemetry.recovery`, read by the report, its plots and the interval advice.

Only records and statistics here, so the modules that fill it import it and not one another.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from training.telemetry.records import CheckpointSave, Fault, Process, RestartEpisode, StepExec, _r

#: The layer of a fault whose recovery no restart event names.
UNKNOWN_LAYER = "unknown"


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolation percentile (Hyndman & Fan type 7, numpy's default); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary_stats(values: list[float]) -> dict[str, float | int | None]:
    """``{p50, p95, max, n}`` of ``values``."""
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values) if values else None,
        "n": len(values),
    }


@dataclass
class RunAnalysis:
    """Everything the report needs; times are absolute epoch seconds unless noted."""

    t0: float | None = None
    t1: float | None = None
    final_step: int | None = None
    steps: list[StepExec] = field(default_factory=list)
    kept: dict[int, StepExec] = field(default_factory=dict)  # step -> its last execution (<= final_step)
    productive_s: float = 0.0
    working_intervals: list[tuple[float, float]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    restarts: list[RestartEpisode] = field(default_factory=list)
    exits: list[dict[str, Any]] = field(default_factory=list)  # the ``exit`` events, in time order
    starts: list[dict[str, Any]] = field(default_factory=list)  # the workers' ``start`` events
    restores: list[dict[str, Any]] = field(default_factory=list)  # the ``restore`` events
    processes: list[Process] = field(default_factory=list)
    stopped: dict[tuple[Any, ...], float] = field(default_factory=dict)  # process key -> when it stopped silently
    saves: list[CheckpointSave] = field(default_factory=list)
    #: The memory tier's snapshots (rank 0's): the loop's stall of each, and the ``auto`` interval's last decision.
    mem_stalls: list[float] = field(default_factory=list)
    mem_interval: int | None = None
    quarantined: int = 0
    step_s_with_ckpt: float | None = None
    step_s_without_ckpt: float | None = None
    freshness_points: list[tuple[float, float]] = field(default_factory=list)  # (t, age) sawtooth vertices
    freshness_max_s: float | None = None
    freshness_mean_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    n_events: int = 0
    has_open_events: bool = False  # any start/restart_end at all (else infrastructure goodput is unmeasurable)

    @property
    def hosts(self) -> list[str]:
        """The hosts (nodes, or pods) the workers ran on, as their events name them."""
        return sorted({p.host for p in self.processes if p.host is not None})

    @property
    def wall_s(self) -> float:
        return 0.0 if self.t0 is None or self.t1 is None else self.t1 - self.t0

    @property
    def working_s(self) -> float:
        return sum(b - a for a, b in self.working_intervals)

    @property
    def training_goodput(self) -> float | None:
        return self.productive_s / self.wall_s if self.wall_s > 0 else None

    @property
    def infrastructure_goodput(self) -> float | None:
        if self.wall_s <= 0 or not self.has_open_events:
            return None
        return self.working_s / self.wall_s

    @property
    def committed(self) -> list[CheckpointSave]:
        return [s for s in self.saves if s.committed_ts is not None]

    @property
    def checkpoint_mode(self) -> str | None:
        modes = Counter(s.mode for s in self.saves if s.mode)
        return modes.most_common(1)[0][0] if modes else None

    @property
    def checkpoint_efficiency(self) -> float | None:
        """Steps per second with checkpoints / steps per second without (= mean step gap without / with)."""
        if self.step_s_with_ckpt is None or self.step_s_without_ckpt is None or self.step_s_with_ckpt <= 0:
            return None
        return self.step_s_without_ckpt / self.step_s_with_ckpt

    def values_by_layer(self, attr: str) -> dict[str, list[float]]:
        """Per recovering layer, the non-null ``attr`` (``recovery_s`` / ``detection_s``) of its faults."""
        groups: dict[str, list[float]] = {}
        for f in self.faults:
            value = getattr(f, attr)
            if value is not None:
                groups.setdefault(f.layer or UNKNOWN_LAYER, []).append(value)
        return dict(sorted(groups.items()))

    def recovery_by_layer(self) -> dict[str, dict[str, float | int | None]]:
        return {layer: _round_stats(summary_stats(v)) for layer, v in self.values_by_layer("recovery_s").items()}

    def detection_by_layer(self) -> dict[str, dict[str, float | int | None]]:
        return {layer: _round_stats(summary_stats(v)) for layer, v in self.values_by_layer("detection_s").items()}

    def restart_causes(self) -> dict[str, Any]:
        return {
            "total": len(self.restarts),
            "by_cause": dict(sorted(Counter(r.cause for r in self.restarts).items())),
            "by_layer": dict(sorted(Counter(r.layer for r in self.restarts).items())),
            "by_layer_and_cause": dict(sorted(Counter(f"{r.layer}/{r.cause}" for r in self.restarts).items())),
        }

    def checkpoint_summary(self) -> dict[str, Any]:
        committed = self.committed
        stalls = [s.stall_s for s in self.saves if s.stall_s is not None]
        waits = [s.backpressure_s for s in self.saves if s.backpressure_s is not None]
        writes = [s.write_s for s in committed if s.write_s is not None]
        with_, without = self.step_s_with_ckpt, self.step_s_without_ckpt
        return {
            "saves": len(committed),
            "attempted": len(self.saves),
            "failed": sum(s.failed for s in self.saves),
            "quarantined": self.quarantined,
            "mode": self.checkpoint_mode,
            "stall_s_mean": _r(statistics.fmean(stalls)) if stalls else None,
            "stall_s_p50": _r(percentile(stalls, 50)),
            "stall_s_p95": _r(percentile(stalls, 95)),
            "stall_s_total": _r(sum(stalls)),
            "backpressure_s": _r(sum(waits)) if waits else None,
            "write_s_mean": _r(statistics.fmean(writes)) if writes else None,
            "write_s_p50": _r(percentile(writes, 50)),
            "write_s_p95": _r(percentile(writes, 95)),
            "interval_s": _r(self.checkpoint_interval_s),
            "step_s_with_checkpoints": _r(with_),
            "step_s_without_checkpoints": _r(without),
            "steps_per_s_with_checkpoints": _r(1 / with_) if with_ else None,
            "steps_per_s_without_checkpoints": _r(1 / without) if without else None,
            "efficiency": _r(self.checkpoint_efficiency),
            "memory_snapshots": len(self.mem_stalls),
            "memory_stall_s_p50": _r(percentile(self.mem_stalls, 50)),
            "memory_stall_s_total": _r(sum(self.mem_stalls)),
            "memory_interval_steps": self.mem_interval,
            # the loop's time in storage saves' stalls and memory snapshots, of the wall time
            "overhead_fraction_of_wall": (
                _r((sum(stalls) + sum(self.mem_stalls)) / self.wall_s) if self.wall_s > 0 else None
            ),
            "committed_steps": [s.step for s in committed],
        }

    @property
    def checkpoint_interval_s(self) -> float | None:
        """The median time between the starts of consecutive saves of one process generation."""
        begins = sorted(s.begin_ts for s in self.saves if s.begin_ts is not None)
        gaps = [b - a for a, b in itertools.pairwise(begins) if b > a]
        return statistics.median(gaps) if gaps else None

    def to_json(self) -> dict[str, Any]:
        """The run-derived part of ``report.json`` (the report adds ``advice``)."""
        t0 = self.t0 or 0.0
        executed = len(self.steps)
        return {
            "training_goodput": _r(self.training_goodput),
            "infrastructure_goodput": _r(self.infrastructure_goodput),
            "wall_seconds": _r(self.wall_s),
            "productive_seconds": _r(self.productive_s),
            "working_seconds": _r(self.working_s),
            "final_step": self.final_step,
            "steps": {
                "executed": executed,
                "kept": len(self.kept),
                "re_executed": executed - len({s.step for s in self.steps}),
                "discarded": executed - len(self.kept),
            },
            "faults": [{**f.to_json(), "time_s": _r(f.ts - t0)} for f in self.faults],
            "recovery_s_by_layer": self.recovery_by_layer(),
            "detection_s_by_layer": self.detection_by_layer(),
            "rollback": {
                "steps_total": sum(f.rollback_steps or 0 for f in self.faults),
                "seconds_total": _r(sum(f.rollback_s or 0.0 for f in self.faults)),
                "lost_work_s_total": _r(sum(f.lost_work_s or 0.0 for f in self.faults)),
            },
            "restarts": self.restart_causes(),
            "checkpoint": self.checkpoint_summary(),
            "freshness": {
                "max_s": _r(self.freshness_max_s),
                "mean_s": _r(self.freshness_mean_s),
                "final_s": _r(self.freshness_points[-1][1]) if self.freshness_points else None,
            },
            "events": {"read": self.n_events},
            "warnings": list(self.warnings),
        }


def _round_stats(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (_r(v) if k != "n" else v) for k, v in d.items()}
