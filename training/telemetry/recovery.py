"""Faults and the working time of the job, from the event log (definitions: ``docs/goodput.md``).

* A fault is an injected one (``fault_injected``), a worker process that stopped without an ``exit`` event (a
  SIGKILL, the OOM killer, a lost node: nothing is written), or a restart that neither explains.
* Its detection, restart, restore and recovery times, the layer that recovered and the work rolled back.
* Working time is counted per rank: the job works while every rank of the current world is in the training loop.

Pure functions over :class:`training.telemetry.analysis.RunAnalysis` (filled in place).
"""

from __future__ import annotations

import bisect
import math
from typing import Any

from training.telemetry.analysis import RunAnalysis
from training.telemetry.events import LAYERS
from training.telemetry.exits import WorkerExit, find_exit
from training.telemetry.records import Fault, Process, RestartEpisode, StepExec, generation, process_key

#: Events that open a rank's working interval (the rank entered the training loop).
OPEN_EVENTS = frozenset({"start", "restart_end"})
#: Events that close it.
CLOSE_EVENTS = frozenset({"fault_injected", "restart_begin", "exit"})


def processes(events: list[dict[str, Any]]) -> list[Process]:
    """The worker processes (rank >= 0) in order of their first event."""
    by_key: dict[tuple[Any, ...], Process] = {}
    for e in events:
        rank = e.get("rank")
        if not isinstance(rank, int) or rank < 0:
            continue
        key = process_key(e)
        p = by_key.get(key)
        if p is None:
            p = by_key[key] = Process(key, rank, e.get("host"), e.get("pid"))
        p.events.append(e)
    return list(by_key.values())


def _signs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events that show a failure being handled: a restart, a non-zero exit, a worker starting."""
    return [
        e
        for e in events
        if e["event"] == "restart_begin"
        or (e["event"] == "exit" and e.get("code"))
        or (e["event"] == "start" and isinstance(e.get("rank"), int) and e["rank"] >= 0)
    ]


def _sign_of_trouble(signs: list[dict[str, Any]], p: Process) -> float | None:
    """The first sign after ``p``'s last event that another process wrote (None: nothing happened after it, the run
    ended); a worker starting is a sign when it replaces ``p``'s rank or belongs to another generation (its peers
    starting alongside it are not)."""
    after, gen = p.last["ts"], generation(p.last)
    i = bisect.bisect_right([e["ts"] for e in signs], after)
    for e in signs[i:]:
        if process_key(e) == p.key:
            continue
        if e["event"] != "start" or e["rank"] == p.rank or generation(e) != gen:
            return e["ts"]
    return None


def _last_step_before(a: RunAnalysis, ts: float, *, inclusive: bool = False) -> StepExec | None:
    """The last step execution that ended before ``ts`` (``inclusive``: at or before)."""
    return next((s for s in reversed(a.steps) if s.ts < ts or (inclusive and s.ts == ts)), None)


def silent_stops(events: list[dict[str, Any]], a: RunAnalysis, exits: list[WorkerExit]) -> None:
    """Add a fault per process that stopped without an ``exit`` event and that no earlier fault explains.

    Its time is the last sign of its life: the later of its own last event and the job's last step before the
    failure showed (every step is collective, so each rank was alive at its end). An injected fault explains it when
    that fault falls between this time and the first sign of trouble, or this time falls inside the fault's
    recovery (a survivor its launcher had to kill).
    """
    stops: list[tuple[float, float, Process]] = []
    signs = _signs(events)
    for p in a.processes:
        if p.exited:
            continue
        sign = _sign_of_trouble(signs, p)
        if sign is None:
            continue
        last_step = _last_step_before(a, sign)
        ts = max(p.last["ts"], last_step.ts if last_step is not None else p.last["ts"])
        stops.append((ts, sign, p))
    for ts, sign, p in sorted(stops, key=lambda s: s[0]):
        explained = next((f for f in a.faults if _explains(f, ts, sign)), None)
        if explained is not None:
            a.stopped[p.key] = explained.ts if explained.injected else ts
            continue
        a.stopped[p.key] = ts
        cause, source = _cause(events, p, find_exit(exits, p.launcher_pid, p.host))
        f = _uninjected(a, cause, ts, p.rank, source, host=p.host, pid=p.pid)
        recover(f, p.last, math.inf, a)


def _uninjected(a: RunAnalysis, cause: str, ts: float, rank: int | None, source: str, **where: Any) -> Fault:
    """A fault nobody injected at ``ts``: the step in flight is the one after the last completed."""
    last = _last_step_before(a, ts, inclusive=True)
    f = Fault(
        kind=f"uninjected:{cause}",
        step=(last.step + 1) if last is not None else None,
        rank=rank,
        ts=ts,
        injected=False,
        cause_source=source,
        **where,
    )
    a.faults.append(f)
    return f


def _explains(f: Fault, ts: float, sign: float) -> bool:
    end = f.recovered_ts if f.recovered_ts is not None else math.inf
    return ts <= f.ts <= sign or f.ts <= ts < end


def _cause(events: list[dict[str, Any]], p: Process, logged: WorkerExit | None) -> tuple[str, str]:
    """(cause, where it was read): the launcher's log line; else a node lost (its host logged nothing more while
    others did); else unknown."""
    if logged is not None:
        return logged.cause, logged.source
    if p.host is not None:
        later = [e for e in events if e["ts"] > p.last["ts"] and e.get("host") is not None]
        if later and all(e["host"] != p.host for e in later):
            return "node_lost", f"host {p.host} wrote no event after {p.last['event']} while other hosts did"
    return "silent_stop", "no exit event and no launcher log line for its pid"


def unexplained_restarts(a: RunAnalysis) -> None:
    """Restarts that no fault explains are faults too (a real exception, a hang, an eviction, ...); their time is the
    job's last step before the restart noticed them."""
    for ep in a.restarts:
        if ep.fault_index is not None:
            continue
        if any(f.ts <= ep.ts < (f.recovered_ts if f.recovered_ts is not None else math.inf) for f in a.faults):
            continue  # part of a recovery under way (a second layer, another rank's view)
        last = _last_step_before(a, ep.detection_ts)
        ts = min(last.ts, ep.detection_ts) if last is not None else ep.detection_ts
        f = _uninjected(a, ep.cause, ts, ep.rank, f"restart_begin of layer {ep.layer}")
        recover(f, None, math.inf, a, detected=ep)


def injected_faults(events: list[dict[str, Any]], a: RunAnalysis) -> None:
    injected = [e for e in events if e["event"] == "fault_injected"]
    for i, e in enumerate(injected):
        step = e.get("step") if isinstance(e.get("step"), int) else None
        pod = e.get("pod") if isinstance(e.get("pod"), int) else None
        f = Fault(
            kind=str(e.get("kind") or "unknown"),
            step=step,
            rank=e.get("fault_rank", e.get("rank")),
            ts=e["ts"],
            phase=e.get("phase"),
            pod=pod,
            host=e.get("host") if pod is None else None,
            pid=e.get("pid") if pod is None else None,
        )
        a.faults.append(f)
        recover(f, e, injected[i + 1]["ts"] if i + 1 < len(injected) else math.inf, a)


def recover(
    f: Fault,
    rec: dict[str, Any] | None,
    window_end: float,
    a: RunAnalysis,
    *,
    detected: RestartEpisode | None = None,
) -> None:
    """Fill in detection, restart, restore, recovery, layer and rollback of ``f`` (``rec``: the event of the
    faulting process, whose generation a new process differs from; ``window_end``: the next injected fault)."""
    index = a.faults.index(f)
    _detect(f, rec, window_end, a, detected, index)
    after = f.detection_ts if f.detection_ts is not None else f.ts
    restore = next((r for r in a.restores if r["ts"] >= after), None)
    resume_after = after
    if restore is not None:
        f.restore_ts, f.restore_tier, resume_after = restore["ts"], restore.get("tier"), restore["ts"]
        if isinstance(restore.get("from_step"), int):
            f.restored_step = restore["from_step"]
    first_new = next((s for s in a.steps if s.ts > resume_after), None)
    if first_new is not None and (f.detection_ts is not None or restore is not None):
        f.recovered_ts = first_new.ts
        if f.restored_step is None:
            f.restored_step = first_new.step - 1
        started = [s["ts"] for s in a.starts if after <= s["ts"] < first_new.ts]
        f.restarted_ts = max(started) if started else None
    _layer(f, a, window_end, detected, index)


def _detect(
    f: Fault, rec: dict[str, Any] | None, window_end: float, a: RunAnalysis, detected: RestartEpisode | None, i: int
) -> None:
    """The earliest of: a restart after the fault, a non-zero exit after it, else a new process generation."""
    eps = [detected] if detected is not None else _restarts_after(f, window_end, a)
    if eps:
        f.detection_ts, f.detection_source = max(f.ts, eps[0].detection_ts), "restart_begin"
    noticed = next((e["ts"] for e in a.exits if f.ts <= e["ts"] < window_end and e.get("code")), None)
    if noticed is not None and (f.detection_ts is None or noticed < f.detection_ts):
        f.detection_ts, f.detection_source = noticed, "exit"
    if f.detection_ts is None and rec is not None:
        gen = generation(rec)
        for s in a.starts:
            if f.ts <= s["ts"] < window_end and generation(s) != gen:
                f.detection_ts, f.detection_source = s["ts"], "new_process"
                layer = _layer_from_generation(gen, generation(s))
                a.restarts.append(RestartEpisode(s["ts"], layer, f.kind, f.rank, fault_index=i, inferred=True))
                a.restarts.sort(key=lambda ep: ep.ts)
                break


def _restarts_after(f: Fault, window_end: float, a: RunAnalysis) -> list[RestartEpisode]:
    """Restarts after the fault and before the next injected one; when a second fault came before any restart
    (overlapping faults), the restarts up to the first step after it, which both faults share."""
    eps = [ep for ep in a.restarts if f.ts <= ep.ts < window_end and ep.fault_index is None]
    if eps or window_end == math.inf:
        return eps
    resumed = next((s.ts for s in a.steps if s.ts > window_end), math.inf)
    return [ep for ep in a.restarts if f.ts <= ep.ts < resumed]


def _layer(f: Fault, a: RunAnalysis, window_end: float, detected: RestartEpisode | None, index: int) -> None:
    """The outermost layer whose restarts fall between the fault and the resumption recovered it (an escalation
    ends in the outer layer; a lost node is replaced by the job layer while ft_launcher restarts the survivors)."""
    if detected is not None:
        mine = [detected]
    else:
        end = min(f.recovered_ts, window_end) if f.recovered_ts is not None else window_end
        mine = [ep for ep in a.restarts if f.ts <= ep.ts < end and ep.fault_index in (None, index)]
        if not mine and f.recovered_ts is not None:  # overlapping faults share the restart that recovered both
            mine = [ep for ep in a.restarts if f.ts <= ep.ts < f.recovered_ts]
    for ep in mine:
        if ep.fault_index is None:
            ep.fault_index = index
    if mine:
        f.layers_tried = [ep.layer for ep in mine]
        f.layer = max((ep.layer for ep in mine), key=_layer_rank)


def rollback(f: Fault, a: RunAnalysis) -> None:
    """Steps completed before the fault and after the restored checkpoint are computed again."""
    if f.restored_step is None:
        return
    last_done = _last_step_before(a, f.ts, inclusive=True)
    done_step = last_done.step if last_done is not None else 0
    if f.injected and f.phase == "step" and f.step is not None:
        # the fault point precedes step N on the faulting rank, which had finished N-1 with every rank; rank 0 may
        # log that step a moment after the fault is logged
        done_step = max(done_step, f.step - 1)
    f.rollback_steps = max(0, done_step - f.restored_step)
    cutoff = f.restore_ts if f.restore_ts is not None else (f.recovered_ts or math.inf)
    latest: dict[int, StepExec] = {}
    for s in a.steps:
        if s.ts < cutoff and f.restored_step < s.step <= done_step:
            latest[s.step] = s
    f.rollback_s = sum(s.duration_s for s in latest.values())
    # Lost work also counts the partial step in flight when the fault hit.
    interval_start = max((lo for lo, hi in a.working_intervals if lo <= f.ts), default=None)
    anchors = [t for t in (last_done.ts if last_done else None, interval_start) if t is not None]
    partial = f.ts - max(anchors) if anchors else 0.0
    f.lost_work_s = f.rollback_s + max(0.0, partial)


def working_intervals(events: list[dict[str, Any]], a: RunAnalysis) -> list[tuple[float, float]]:
    """When the job worked: every rank of the current world size (the newest ``start``'s ``world_size``, at most the
    number of ranks that log a ``start`` at all) had an open interval. A rank's interval opens at its ``start`` /
    ``restart_end`` and closes at its ``fault_injected``, ``restart_begin`` or ``exit``; a process that stopped
    without a word closes at its fault's time."""
    edges: list[tuple[float, int, int]] = []  # (ts, +1 open / -1 close, rank)
    for p in a.processes:
        open_at: float | None = None
        for e in p.events:
            if e["event"] in OPEN_EVENTS and open_at is None:
                open_at = e["ts"]
            elif e["event"] in CLOSE_EVENTS and open_at is not None:
                edges += [(open_at, 1, p.rank), (e["ts"], -1, p.rank)]
                open_at = None
        if open_at is not None:
            end = a.stopped.get(p.key, a.t1)
            edges += [(open_at, 1, p.rank), (max(open_at, end), -1, p.rank)]  # type: ignore[type-var]
    # A log that speaks for the world with fewer ranks (the planner's simulation logs rank 0 only) counts those.
    logging = len({e.get("rank") for e in a.starts})
    worlds = [(e["ts"], min(int(e.get("world_size") or 1), logging)) for e in a.starts]
    out: list[tuple[float, float]] = []
    open_ranks: dict[int, int] = {}
    since: float | None = None
    for ts, delta, rank in sorted(edges, key=lambda x: (x[0], x[1])):
        open_ranks[rank] = open_ranks.get(rank, 0) + delta
        world = next((w for t, w in reversed(worlds) if t <= ts), 1)
        working = sum(1 for n in open_ranks.values() if n > 0) >= world
        if working and since is None:
            since = ts
        elif not working and since is not None:
            if ts > since:
                out.append((since, ts))
            since = None
    if since is not None and a.t1 is not None and a.t1 > since:
        out.append((since, a.t1))
    return out


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
