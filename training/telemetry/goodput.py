"""Goodput math over a run's event log (``events.jsonl``): pure functions, no I/O except :func:`load_events`.

The exact definitions live in ``docs/goodput.md``; this module implements them one for one:

* wall time, training goodput, infrastructure goodput;
* per fault (:mod:`training.telemetry.recovery`): detection, restart, restore and recovery time, rollback (steps
  and seconds), lost work, recovering layer; a worker that stopped without an event is a fault too;
* recovery-time percentiles per layer; restart causes;
* checkpoint overhead (stall with back-pressure, write, efficiency) and checkpoint freshness over time.

:func:`analyze` takes the events (dicts as written by :class:`training.telemetry.events.EventLog`) and returns a
:class:`training.telemetry.analysis.RunAnalysis`; its ``to_json`` is the bulk of ``report.json``.
"""

from __future__ import annotations

import itertools
import os
import statistics
from pathlib import Path
from typing import Any

from training.telemetry import recovery
from training.telemetry.analysis import UNKNOWN_LAYER, RunAnalysis
from training.telemetry.events import EVENTS_FILE, LoadedEvents, parse_event_lines
from training.telemetry.exits import WorkerExit
from training.telemetry.records import (
    CheckpointSave,
    RestartEpisode,
    StepExec,
    generation,
    process_key,
)
from training.telemetry.records import _r as _r
from training.telemetry.records import is_number as _is_number

__all__ = ["LoadedEvents", "analyze", "load_events", "parse_event_lines"]

#: Events after which two consecutive ``step`` events no longer measure one step's duration.
SEGMENT_BREAKS = recovery.OPEN_EVENTS | recovery.CLOSE_EVENTS | {"restore"}
#: Step gaps with no checkpoint activity at all that the estimate of the speed without checkpoints needs.
MIN_IDLE_GAPS = 3


def load_events(run_dir: str | os.PathLike[str]) -> LoadedEvents:
    """Read ``RUN_DIR/events.jsonl``; bad lines are skipped and counted, never raised."""
    path = Path(run_dir) / EVENTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no event log at {path}")
    return parse_event_lines(path.read_text(errors="replace").splitlines())


def analyze(events: list[dict[str, Any]], worker_exits: list[WorkerExit] | None = None) -> RunAnalysis:
    """Compute every number of the report from ``events`` (sorted by ``ts``; see :func:`parse_event_lines`);
    ``worker_exits`` (:func:`training.telemetry.exits.read_worker_exits`) name the cause of silent stops."""
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
    _steps(events, a)
    _checkpoints(events, a)
    _throughput(a)
    _restarts(events, a)
    a.exits = [e for e in events if e["event"] == "exit"]
    a.starts = [e for e in events if e["event"] == "start" and (e.get("rank") is None or e["rank"] >= 0)]
    a.restores = [e for e in events if e["event"] == "restore"]
    a.processes = recovery.processes(events)
    recovery.injected_faults(events, a)
    recovery.silent_stops(events, a, worker_exits or [])
    recovery.unexplained_restarts(a)
    _working_time(events, a)
    for f in a.faults:
        recovery.rollback(f, a)
    a.faults.sort(key=lambda f: f.ts)
    _freshness(a)
    _checkpoint_warnings(a)
    return a


# --------------------------------------------------------------------------------------------- parts


def _working_time(events: list[dict[str, Any]], a: RunAnalysis) -> None:
    a.has_open_events = any(e["event"] in recovery.OPEN_EVENTS for e in events)
    if not a.has_open_events:
        a.warnings.append("no start/restart_end events: infrastructure goodput cannot be measured")
        return
    a.working_intervals = recovery.working_intervals(events, a)
    if not a.exits:
        a.warnings.append("no exit event: the run was still going or was killed; the last event ends the run")


def _throughput(a: RunAnalysis) -> None:
    """Mean step gap with checkpoints (all gaps) and without: the gaps with no save in them and no asynchronous
    write in flight (a background write slows the steps it overlaps: that is checkpoint cost too). With fewer than
    :data:`MIN_IDLE_GAPS` such gaps, the gaps with no save in them, and a warning."""
    gaps = [s for s in a.steps if s.gap_s is not None and not s.had_eval]
    if not gaps:
        return
    a.step_s_with_ckpt = statistics.fmean(s.gap_s for s in gaps)  # type: ignore[misc]
    writes = [
        (s.begin_ts, s.committed_ts if s.committed_ts is not None else a.t1)
        for s in a.saves
        if s.mode != "sync" and s.begin_ts is not None
    ]
    no_save = [s for s in gaps if not s.had_checkpoint]
    idle = [s.gap_s for s in no_save if not any(s.ts - s.gap_s < end and s.ts > begin for begin, end in writes)]  # type: ignore[operator]
    if len(idle) >= MIN_IDLE_GAPS or len(idle) == len(no_save):
        a.step_s_without_ckpt = statistics.fmean(idle) if idle else None
        return
    a.step_s_without_ckpt = statistics.fmean(s.gap_s for s in no_save)  # type: ignore[misc]
    a.warnings.append(
        f"only {len(idle)} step gap(s) ran with no checkpoint write in flight (fewer than {MIN_IDLE_GAPS}): steps/s "
        "without checkpoints comes from gaps that overlapped background writes, which slow them; the efficiency may "
        "read high"
    )


def _checkpoint_warnings(a: RunAnalysis) -> None:
    ck = a.checkpoint_summary()
    interval, write = ck["interval_s"], ck["write_s_mean"]
    if interval is not None and write is not None and interval < write:
        a.warnings.append(
            f"checkpoint interval {interval:.2f} s is shorter than the write time {write:.2f} s: every save waits "
            f"for the previous write (back-pressure {ck['backpressure_s'] or 0:.2f} s in all); checkpoint less often "
            "or make writes faster"
        )


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
            mono = e.get("mono") if _is_number(e.get("mono")) else None
            ex = StepExec(step=step, ts=e["ts"], step_s=step_s, mono=mono, process=process_key(e))
            if prev is not None and prev_segment == segment and step == prev.step + 1:
                # within one process its monotonic clock measures the gap (immune to a wall-clock step)
                same = ex.process == prev.process and ex.mono is not None and prev.mono is not None
                ex.gap_s = ex.mono - prev.mono if same else ex.ts - prev.ts  # type: ignore[operator]
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


def _checkpoints(events: list[dict[str, Any]], a: RunAnalysis) -> None:
    by_key: dict[tuple[Any, ...], CheckpointSave] = {}
    for e in events:
        name = e["event"]
        if name == "ckpt_quarantined":
            a.quarantined += 1
            continue
        if name == "mem_snapshot" and e.get("rank", 0) == 0 and _is_number(e.get("stall_s")) and "error" not in e:
            a.mem_stalls.append(float(e["stall_s"]))
        if name == "mem_interval" and isinstance(e.get("interval"), int):
            a.mem_interval = e["interval"]
        if name not in ("ckpt_begin", "ckpt_staged", "ckpt_committed", "ckpt_failed"):
            continue
        if e.get("op") == "restore":  # a checkpoint that could not be read back: no save
            continue
        step = e.get("step")
        if not isinstance(step, int):
            continue
        key = (step, *generation(e))
        save = by_key.get(key)
        if save is None or (save.committed_ts is not None and name == "ckpt_begin"):
            save = by_key[key] = CheckpointSave(step=step)
            a.saves.append(save)
        if name == "ckpt_begin":
            save.mode = e.get("mode") or save.mode
            save.begin_ts = e["ts"] if save.begin_ts is None else min(save.begin_ts, e["ts"])
            if _is_number(e.get("backpressure_s")):
                save.backpressure_s = max(save.backpressure_s or 0.0, float(e["backpressure_s"]))
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
    """Merge the ranks' restart_begin events of one restart: same layer, no step in between, each rank once. Not by
    the generation counters: ranks in different pods count apart (a replaced pod's launcher and attempt start anew),
    so one in-process restart of two pods carried two generations. A rank that reports again, or any rank after a
    fault injected since, begins another."""
    current: dict[str, tuple[RestartEpisode, int, set[Any]]] = {}  # layer -> (episode, steps seen, its ranks)
    steps_seen = 0
    for e in events:
        if e["event"] == "step":
            steps_seen += 1
        elif e["event"] == "fault_injected":
            current.clear()  # what restarts after it answers this fault
        elif e["event"] == "restart_begin":
            layer = str(e.get("layer") or UNKNOWN_LAYER)
            rank = e.get("rank")
            detected = e.get("detected_ts") if _is_number(e.get("detected_ts")) else None
            same = current.get(layer)
            if same is not None and same[1] == steps_seen and rank not in same[2]:
                prev, _, ranks = same  # another rank reporting the same restart
                ranks.add(rank)
                if detected is not None:
                    prev.detected_ts = detected if prev.detected_ts is None else min(prev.detected_ts, detected)
                continue
            ep = RestartEpisode(
                ts=e["ts"],
                layer=layer,
                cause=str(e.get("cause") or "unknown"),
                rank=rank,
                detected_ts=detected,
            )
            current[layer] = (ep, steps_seen, {rank})
            a.restarts.append(ep)
        elif e["event"] == "restart_end":
            for ep in reversed(a.restarts):
                if ep.end_ts is None and ep.layer == (e.get("layer") or ep.layer):
                    ep.end_ts = e["ts"]
                    break


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
