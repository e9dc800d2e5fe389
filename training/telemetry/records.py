"""What the goodput analysis builds from the event log: step executions, saves, restarts, processes and faults.

Plain data; the rules that fill them in are :mod:`training.telemetry.goodput` (steps, checkpoints, restarts) and
:mod:`training.telemetry.recovery` (faults). Times are epoch seconds (``ts``, the wall clock every host shares).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: A process generation: (``restart``, ``attempt``, ``relaunch``, ``iteration``) of an event.
Generation = tuple[Any, Any, Any, Any]


def generation(e: dict[str, Any]) -> Generation:
    return (e.get("restart", 0), e.get("attempt", 0), e.get("relaunch", 0), e.get("iteration", 0))


def process_key(e: dict[str, Any]) -> tuple[Any, ...]:
    """The process that wrote ``e``: (host, pid) when logged, else (rank, restart, attempt, relaunch) (older logs:
    a worker process lives through in-process iterations, not through a launcher restart)."""
    if e.get("pid") is not None:
        return ("pid", e.get("host"), e["pid"])
    return ("rank", e.get("rank"), *generation(e)[:3])


@dataclass
class StepExec:
    """One execution of one optimizer step (a ``step`` event)."""

    step: int
    ts: float  # end of the step
    step_s: float | None  # as reported by the trainer
    mono: float | None = None  # the writer's monotonic clock at the end of the step
    process: tuple[Any, ...] = ()  # the writer (:func:`process_key`)
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
    stall_s: float | None = None  # the loop was blocked this long, back-pressure included
    backpressure_s: float | None = None  # of which waiting for the previous write to finish
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
    fault_index: int | None = None  # the fault it belongs to
    inferred: bool = False  # no restart_begin was logged; seen as a new process generation after a fault
    detected_ts: float | None = None  # optional restart_begin field: when the layer noticed the fault

    @property
    def detection_ts(self) -> float:
        """When the layer noticed the fault: ``detected_ts`` if logged, else the restart_begin itself."""
        return self.detected_ts if self.detected_ts is not None and self.detected_ts <= self.ts else self.ts


@dataclass
class Process:
    """One worker process (rank >= 0) as its events show it."""

    key: tuple[Any, ...]
    rank: int
    host: str | None
    pid: int | None
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def launcher_pid(self) -> int | None:
        """The pid its launcher knows it by (and logs): a forked worker's stand-in (``training.launch.prefork``), else
        its own."""
        return next((e["launcher_pid"] for e in self.events if "launcher_pid" in e), self.pid)

    @property
    def last(self) -> dict[str, Any]:
        return self.events[-1]

    @property
    def exited(self) -> bool:
        return any(e["event"] == "exit" for e in self.events)


@dataclass
class Fault:
    """One fault: injected (``fault_injected``), a rank that stopped without a word, or a restart nobody injected."""

    kind: str
    step: int | None
    rank: int | None
    ts: float
    injected: bool = True
    phase: str | None = None
    pod: int | None = None  # node faults (node-loss, evict): the completion index of the pod they hit
    host: str | None = None
    pid: int | None = None
    cause_source: str | None = None  # where an uninjected fault's cause was read (a launcher log line, ...)
    layer: str | None = None  # the layer that recovered
    layers_tried: list[str] = field(default_factory=list)
    detection_ts: float | None = None
    detection_source: str | None = None  # "restart_begin" | "exit" | "new_process" | None
    restarted_ts: float | None = None  # the last worker of the recovering generation started
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

    @property
    def restart_s(self) -> float | None:
        """Detection -> the recovering workers started (the launcher's or the wrapper's part)."""
        if self.detection_ts is None or self.restarted_ts is None or self.recovered_ts is None:
            return None
        return self.restarted_ts - self.detection_ts

    @property
    def restore_s(self) -> float | None:
        """Workers started -> the first new step (setup, checkpoint load, the first step again)."""
        if self.restarted_ts is None or self.recovered_ts is None:
            return None
        return self.recovered_ts - self.restarted_ts

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "layer": self.layer,
            "step": self.step,
            "rank": self.rank,
            "pod": self.pod,
            "host": self.host,
            "pid": self.pid,
            "detection_s": _r(self.detection_s),
            "restart_s": _r(self.restart_s),
            "restore_s": _r(self.restore_s),
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
            "cause_source": self.cause_source,
            "time_s": _r(self.ts),  # relative to the run start once RunAnalysis.to_json shifted it
        }


def is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)
