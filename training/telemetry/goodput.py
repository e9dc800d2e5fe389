"""Goodput math over a run's event log (``events.jsonl``): pure functions, no I/O except :func:`load_events`.

The exact definitions live in ``docs/goodput.md``; this module implements them one for one:

* wall time, training goodput, infrastructure goodput;
* per fault: detection latency, recovery time, rollback (steps and seconds), lost work, recovering layer;
* recovery-time percentiles per layer; restart causes;
* checkpoint overhead (stall, write, efficiency) and checkpoint freshness over time.

:func:`analyze` takes the events (dicts as written by :class:`training.telemetry.events.EventLog`) and returns a
:class:`RunAnalysis`; :meth:`RunAnalysis.to_json` is the bulk of ``report.json``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.telemetry.events import EVENTS_FILE, LAYERS

#: Events that open a working interval (workers in the training loop).
OPEN_EVENTS = frozenset({"start", "restart_end"})
#: Events that close a working interval.
CLOSE_EVENTS = frozenset({"fault_injected", "restart_begin", "exit"})
#: Events after which two consecutive ``step`` events no longer measure one step's duration.
SEGMENT_BREAKS = OPEN_EVENTS | CLOSE_EVENTS | {"restore"}
UNKNOWN_LAYER = "unknown"


@dataclass(frozen=True)
class LoadedEvents:
    """The parsed event log and what had to be skipped."""

    events: list[dict[str, Any]]
    torn_lines: int = 0  # lines that are not JSON (a writer killed mid-line)
    malformed: int = 0  # JSON lines without a numeric ``ts`` or a string ``event``


def parse_event_lines(lines: list[str]) -> LoadedEvents:
    """Parse JSON lines; skip torn or malformed ones; order by ``ts`` (file order breaks ties)."""
    events: list[dict[str, Any]] = []
    torn = malformed = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            torn += 1
            continue
        if (
            not isinstance(rec, dict)
            or not isinstance(rec.get("event"), str)
            or not _is_number(rec.get("ts"))
            or not math.isfinite(rec["ts"])
        ):
            malformed += 1
            continue
        events.append(rec)
    events.sort(key=lambda e: e["ts"])
    return LoadedEvents(events, torn, malformed)


def load_events(run_dir: str | os.PathLike[str]) -> LoadedEvents:
    """Read ``RUN_DIR/events.jsonl``; unlike :func:`training.telemetry.events.read_events` bad lines never raise."""
    path = Path(run_dir) / EVENTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no event log at {path}")
    return parse_event_lines(path.read_text(errors="replace").splitlines())


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
class StepExec:
    """One execution of one optimizer step (a ``step`` event)."""

    step: int
    ts: float  # end of the step
    step_s: float | None  # as reported by the trainer
    gap_s: float | None = None  # time since the previous step event, when that was step-1 in the same segment
    duration_s: float = 0.0  # step_s, else gap_s, else the median of the known durations
    had_checkpoint: bool = False  # a ckpt_begin/ckpt_staged fell inside the gap
    had_eval: bool = False


@dataclass
class CheckpointSave:
    """One checkpoint save (all ranks' events merged)."""

    step: int
    mode: str | None = None
    begin_ts: float | None = None
    stall_s: float | None = None
    write_s: float | None = None
    committed_ts: float | None = None
    failed: bool = False


@dataclass
class RestartEpisode:
    """One restart (``restart_begin`` events of all ranks for the same restart merged)."""

    ts: float
    layer: str
    cause: str
    rank: int | None
    end_ts: float | None = None
    fault_index: int | None = None  # the injected fault it belongs to
    inferred: bool = False  # no restart_begin was logged; seen as a new process generation after a fault
    detected_ts: float | None = None  # optional restart_begin field: when the layer noticed the fault

    @property
    def detection_ts(self) -> float:
        """When the layer noticed the fault: ``detected_ts`` if logged, else the restart_begin itself."""
        return self.detected_ts if self.detected_ts is not None and self.detected_ts <= self.ts else self.ts


@dataclass
class Fault:
    """One fault: injected (a ``fault_injected`` event) or seen only as a restart (``injected`` False)."""

    kind: str
    step: int | None
    rank: int | None
    ts: float
    injected: bool = True
    phase: str | None = None
    pod: int | None = None  # node faults (node-loss, evict): the completion index of the pod they hit
    layer: str | None = None  # the layer that recovered
    layers_tried: list[str] = field(default_factory=list)
    detection_ts: float | None = None
    detection_source: str | None = None  # "restart_begin" | "exit" | "new_process" | None
    restore_ts: float | None = None
    restored_step: int | None = None
    restore_tier: str | None = None
    recovered_ts: float | None = None  # the first new step after the restore
    rollback_steps: int | None = None
    rollback_s: float | None = None
    lost_work_s: float | None = None

    @property
    def detection_s(self) -> float | None:
        return None if self.detection_ts is None else self.detection_ts - self.ts

    @property
    def recovery_s(self) -> float | None:
        return None if self.recovered_ts is None else self.recovered_ts - self.ts

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "layer": self.layer,
            "step": self.step,
            "rank": self.rank,
            "pod": self.pod,
            "detection_s": _r(self.detection_s),
            "recovery_s": _r(self.recovery_s),
            "rollback_steps": self.rollback_steps,
            "rollback_s": _r(self.rollback_s),
            "lost_work_s": _r(self.lost_work_s),
            "restored_step": self.restored_step,
            "restore_tier": self.restore_tier,
            "injected": self.injected,
            "phase": self.phase,
            "layers_tried": self.layers_tried,
            "detection_source": self.detection_source,
            "time_s": _r(self.ts),  # relative to the run start once analyze() shifted it
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
    saves: list[CheckpointSave] = field(default_factory=list)
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
        writes = [s.write_s for s in committed if s.write_s is not None]
        return {
            "saves": len(committed),
            "attempted": len(self.saves),
            "failed": sum(s.failed for s in self.saves),
            "quarantined": self.quarantined,
            "mode": self.checkpoint_mode,
            "stall_s_p50": _r(percentile(stalls, 50)),
            "stall_s_p95": _r(percentile(stalls, 95)),
            "stall_s_total": _r(sum(stalls)),
            "write_s_p50": _r(percentile(writes, 50)),
            "write_s_p95": _r(percentile(writes, 95)),
            "step_s_with_checkpoints": _r(self.step_s_with_ckpt),
            "step_s_without_checkpoints": _r(self.step_s_without_ckpt),
            "efficiency": _r(self.checkpoint_efficiency),
            "overhead_fraction_of_wall": _r(sum(stalls) / self.wall_s) if self.wall_s > 0 else None,
            "committed_steps": [s.step for s in committed],
        }

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


def analyze(events: list[dict[str, Any]]) -> RunAnalysis:
    """Compute every number of the report from ``events`` (sorted by ``ts``; see :func:`parse_event_lines`)."""
    events = sorted(
        (e for e in events if _is_number(e.get("ts")) and isinstance(e.get("event"), str)), key=lambda e: e["ts"]
    )
    a = RunAnalysis(n_events=len(events))
    if not events:
        a.warnings.append("the event log is empty: nothing to report")
        return a
    a.t0, a.t1 = events[0]["ts"], events[-1]["ts"]
    if a.wall_s <= 0:
        a.warnings.append("the event log spans no time (one timestamp): goodput is undefined")
    _working_intervals(events, a)
    _steps(events, a)
    _checkpoints(events, a)
    _restarts(events, a)
    a.exits = [e for e in events if e["event"] == "exit"]
    _faults(events, a)
    _freshness(a)
    return a


# --------------------------------------------------------------------------------------------- parts


def _working_intervals(events: list[dict[str, Any]], a: RunAnalysis) -> None:
    """Union over ranks: open at the first start/restart_end, close at the first fault/restart_begin/exit."""
    open_at: float | None = None
    for e in events:
        if e["event"] in OPEN_EVENTS:
            a.has_open_events = True
            if open_at is None:
                open_at = e["ts"]
        elif e["event"] in CLOSE_EVENTS and open_at is not None:
            a.working_intervals.append((open_at, e["ts"]))
            open_at = None
    if open_at is not None:
        a.working_intervals.append((open_at, a.t1))  # type: ignore[arg-type]
        if not any(e["event"] == "exit" for e in events):
            a.warnings.append("no exit event: the run was still going or was killed; the last event ends the run")
    if not a.has_open_events:
        a.warnings.append("no start/restart_end events: infrastructure goodput cannot be measured")


def _steps(events: list[dict[str, Any]], a: RunAnalysis) -> None:
    segment = 0
    prev: StepExec | None = None
    prev_segment = -1
    ckpt_since_prev = eval_since_prev = False
    bad = 0
    for e in events:
        name = e["event"]
        if name in SEGMENT_BREAKS:
            segment += 1
        elif name in ("ckpt_begin", "ckpt_staged"):
            ckpt_since_prev = True
        elif name == "eval":
            eval_since_prev = True
        elif name == "step":
            step = e.get("step")
            if not isinstance(step, int) or isinstance(step, bool):
                bad += 1
                continue
            step_s = e.get("step_s") if _is_number(e.get("step_s")) and e["step_s"] >= 0 else None
            ex = StepExec(step=step, ts=e["ts"], step_s=step_s)
            if prev is not None and prev_segment == segment and step == prev.step + 1:
                ex.gap_s = ex.ts - prev.ts
                ex.had_checkpoint, ex.had_eval = ckpt_since_prev, eval_since_prev
            a.steps.append(ex)
            prev, prev_segment = ex, segment
            ckpt_since_prev = eval_since_prev = False
    if bad:
        a.warnings.append(f"{bad} step event(s) without an integer 'step' were ignored")
    if not a.steps:
        a.warnings.append("no step events: training goodput is 0 and step-based numbers are unavailable")
        return
    known = [s.step_s if s.step_s is not None else s.gap_s for s in a.steps]
    known_vals = [k for k in known if k is not None]
    fallback = statistics.median(known_vals) if known_vals else 0.0
    guessed = 0
    for ex, k in zip(a.steps, known, strict=True):
        if k is None:
            guessed += 1
        # a step cannot have started before the run's first event
        ex.duration_s = min(k if k is not None else fallback, ex.ts - a.t0)  # type: ignore[operator]
    if guessed:
        a.warnings.append(f"{guessed} step(s) had neither step_s nor a measurable gap: the median step time was used")
    a.final_step = a.steps[-1].step
    for ex in a.steps:  # in time order: later executions replace earlier ones
        if ex.step <= a.final_step:
            a.kept[ex.step] = ex
    a.productive_s = sum(ex.duration_s for ex in a.kept.values())
    gaps = [s for s in a.steps if s.gap_s is not None and not s.had_eval]
    if gaps:
        a.step_s_with_ckpt = statistics.fmean(s.gap_s for s in gaps)  # type: ignore[misc]
        clean = [s.gap_s for s in gaps if not s.had_checkpoint]
        a.step_s_without_ckpt = statistics.fmean(clean) if clean else None  # type: ignore[arg-type]


def _gen(e: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    return (e.get("restart", 0), e.get("attempt", 0), e.get("relaunch", 0), e.get("iteration", 0))


def _checkpoints(events: list[dict[str, Any]], a: RunAnalysis) -> None:
    by_key: dict[tuple[Any, ...], CheckpointSave] = {}
    for e in events:
        name = e["event"]
        if name == "ckpt_quarantined":
            a.quarantined += 1
            continue
        if name not in ("ckpt_begin", "ckpt_staged", "ckpt_committed", "ckpt_failed"):
            continue
        if e.get("op") == "restore":  # a checkpoint that could not be read back: no save
            continue
        step = e.get("step")
        if not isinstance(step, int):
            continue
        key = (step, *_gen(e))
        save = by_key.get(key)
        if save is None or (save.committed_ts is not None and name == "ckpt_begin"):
            save = by_key[key] = CheckpointSave(step=step)
            a.saves.append(save)
        if name == "ckpt_begin":
            save.mode = e.get("mode") or save.mode
            save.begin_ts = e["ts"] if save.begin_ts is None else min(save.begin_ts, e["ts"])
        elif name == "ckpt_staged" and _is_number(e.get("stall_s")):
            save.stall_s = max(save.stall_s or 0.0, float(e["stall_s"]))
        elif name == "ckpt_committed":
            if _is_number(e.get("write_s")):
                save.write_s = max(save.write_s or 0.0, float(e["write_s"]))
            if save.committed_ts is None:
                save.committed_ts = e["ts"]
        elif name == "ckpt_failed":
            save.failed = True


def _restarts(events: list[dict[str, Any]], a: RunAnalysis) -> None:
    """Merge the ranks' restart_begin events of one restart: same layer and generation, no step in between."""
    last: dict[tuple[Any, ...], tuple[RestartEpisode, int]] = {}
    steps_seen = 0
    for e in events:
        if e["event"] == "step":
            steps_seen += 1
        elif e["event"] == "restart_begin":
            layer = str(e.get("layer") or UNKNOWN_LAYER)
            key = (layer, *_gen(e))
            detected = e.get("detected_ts") if _is_number(e.get("detected_ts")) else None
            if key in last and last[key][1] == steps_seen:
                prev = last[key][0]  # another rank reporting the same restart
                if detected is not None:
                    prev.detected_ts = detected if prev.detected_ts is None else min(prev.detected_ts, detected)
                continue
            ep = RestartEpisode(
                ts=e["ts"],
                layer=layer,
                cause=str(e.get("cause") or "unknown"),
                rank=e.get("rank"),
                detected_ts=detected,
            )
            last[key] = (ep, steps_seen)
            a.restarts.append(ep)
        elif e["event"] == "restart_end":
            for ep in reversed(a.restarts):
                if ep.end_ts is None and ep.layer == (e.get("layer") or ep.layer):
                    ep.end_ts = e["ts"]
                    break


def _faults(events: list[dict[str, Any]], a: RunAnalysis) -> None:
    injected = [e for e in events if e["event"] == "fault_injected"]
    starts = [e for e in events if e["event"] == "start"]
    restores = [e for e in events if e["event"] == "restore"]
    step_ts = [s.ts for s in a.steps]
    for i, e in enumerate(injected):
        step = e.get("step") if isinstance(e.get("step"), int) else None
        rank = e.get("fault_rank", e.get("rank"))
        pod = e.get("pod") if isinstance(e.get("pod"), int) else None
        f = Fault(kind=str(e.get("kind") or "unknown"), step=step, rank=rank, ts=e["ts"], phase=e.get("phase"), pod=pod)
        window_end = injected[i + 1]["ts"] if i + 1 < len(injected) else math.inf
        a.faults.append(f)
        _recover(f, e, window_end, a, starts, restores, step_ts, fault_index=len(a.faults) - 1)
    # Restarts that no injected fault explains are faults too (a real failure, a pod eviction, ...).
    for ep in a.restarts:
        if ep.fault_index is not None:
            continue
        before = [s for s in a.steps if s.ts <= ep.ts]
        f = Fault(
            kind=f"uninjected:{ep.cause}",
            step=(before[-1].step + 1) if before else None,
            rank=ep.rank,
            ts=ep.detection_ts,
            injected=False,
            detection_ts=ep.detection_ts,
            detection_source="restart_begin",
        )
        a.faults.append(f)
        _recover(f, None, math.inf, a, starts, restores, step_ts, fault_index=len(a.faults) - 1, detected=ep)
    a.faults.sort(key=lambda f: f.ts)


def _recover(
    f: Fault,
    rec: dict[str, Any] | None,
    window_end: float,
    a: RunAnalysis,
    starts: list[dict[str, Any]],
    restores: list[dict[str, Any]],
    step_ts: list[float],
    *,
    fault_index: int,
    detected: RestartEpisode | None = None,
) -> None:
    # Detection: the first restart_begin after the fault (before the next injected fault) ...
    eps = [ep for ep in a.restarts if f.ts <= ep.ts < window_end and ep.fault_index is None]
    if detected is not None:
        eps = [detected]
    if eps:
        f.detection_ts, f.detection_source = max(f.ts, eps[0].detection_ts), "restart_begin"
    # A process that ended with a non-zero code noticed the fault (the faulting rank itself, or a survivor of a lost
    # node: its peer was lost, 14) before any restart_begin, which new workers log only once they started.
    noticed = next((e["ts"] for e in a.exits if f.ts <= e["ts"] < window_end and e.get("code")), None)
    if noticed is not None and (f.detection_ts is None or noticed < f.detection_ts):
        f.detection_ts, f.detection_source = noticed, "exit"
    if f.detection_ts is None and rec is not None:
        # ... or, when no layer logged one (the process died), the first start of a new process generation.
        gen = _gen(rec)
        for s in starts:
            if f.ts <= s["ts"] < window_end and _gen(s) != gen:
                f.detection_ts, f.detection_source = s["ts"], "new_process"
                f.layer = _layer_from_generation(gen, _gen(s))
                f.layers_tried = [f.layer]
                a.restarts.append(
                    RestartEpisode(
                        ts=s["ts"], layer=f.layer, cause=f.kind, rank=f.rank, fault_index=fault_index, inferred=True
                    )
                )
                a.restarts.sort(key=lambda ep: ep.ts)
                break
    after = f.detection_ts if f.detection_ts is not None else f.ts
    # Recovery: the first restore after detection, then the first step event after that restore.
    restore = next((r for r in restores if r["ts"] >= after), None)
    if restore is not None:
        f.restore_ts = restore["ts"]
        f.restore_tier = restore.get("tier")
        if isinstance(restore.get("from_step"), int):
            f.restored_step = restore["from_step"]
        resume_after = restore["ts"]
    else:
        resume_after = after
    first_new = next((s for s in a.steps if s.ts > resume_after), None)
    if first_new is not None and (f.detection_ts is not None or restore is not None):
        f.recovered_ts = first_new.ts
        if f.restored_step is None:
            f.restored_step = first_new.step - 1
    # The layers whose restarts fall between the fault and the resumption; the outermost one recovered (an escalation
    # ends in the outer layer; a lost node is replaced by the job layer while ft_launcher restarts the survivors).
    end = min(f.recovered_ts, window_end) if f.recovered_ts is not None else window_end
    mine = [ep for ep in a.restarts if f.ts <= ep.ts < end and ep.fault_index is None] if detected is None else eps
    for ep in mine:
        ep.fault_index = fault_index
    if mine:
        f.layers_tried = [ep.layer for ep in mine]
        f.layer = max((ep.layer for ep in mine), key=_layer_rank)
    # Rollback: steps (restored, fault step] that had been computed before the restore are recomputed.
    if f.step is not None and f.restored_step is not None:
        f.rollback_steps = max(0, f.step - f.restored_step)
        cutoff = f.restore_ts if f.restore_ts is not None else (f.recovered_ts or math.inf)
        latest: dict[int, StepExec] = {}
        for s in a.steps:
            if s.ts < cutoff and f.restored_step < s.step <= f.step:
                latest[s.step] = s
        f.rollback_s = sum(s.duration_s for s in latest.values())
        # Lost work also counts the partial step in flight when the fault hit.
        last_done = max((t for t in step_ts if t <= f.ts), default=None)
        interval_start = max((lo for lo, hi in a.working_intervals if lo <= f.ts), default=None)
        anchors = [t for t in (last_done, interval_start) if t is not None]
        partial = f.ts - max(anchors) if anchors else 0.0
        f.lost_work_s = f.rollback_s + max(0.0, partial)


def _layer_rank(layer: str) -> int:
    """Inner to outer: in-process, ft_launcher, job; unknown layers rank lowest."""
    return LAYERS.index(layer) if layer in LAYERS else -1


def _layer_from_generation(old: tuple[Any, ...], new: tuple[Any, ...]) -> str:
    restart_old, attempt_old, relaunch_old, _ = old
    restart_new, attempt_new, relaunch_new, _ = new
    if attempt_new != attempt_old or relaunch_new != relaunch_old:
        return "job"
    if restart_new != restart_old:
        return "ft_launcher"
    return "inprocess"


def _freshness(a: RunAnalysis) -> None:
    """Age of the newest committed checkpoint; before the first commit the run start counts as one."""
    if a.t0 is None or a.t1 is None or a.wall_s <= 0:
        return
    commits = sorted(s.committed_ts for s in a.committed if s.committed_ts is not None)
    marks = [a.t0, *[c for c in commits if a.t0 <= c <= a.t1], a.t1]
    pts: list[tuple[float, float]] = [(a.t0, 0.0)]
    area = 0.0
    longest = 0.0
    for lo, hi in itertools.pairwise(marks):
        span = hi - lo
        area += span * span / 2
        longest = max(longest, span)
        pts.append((hi, span))
        if hi != a.t1:
            pts.append((hi, 0.0))
    a.freshness_points = pts
    a.freshness_max_s = longest
    a.freshness_mean_s = area / a.wall_s


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def _round_stats(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (_r(v) if k != "n" else v) for k, v in d.items()}
