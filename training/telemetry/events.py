"""The run's event log: ``<run_dir>/events.jsonl``, the single source for the goodput report.

Every rank of every restart appends JSON lines to the same file (``O_APPEND`` writes of one
line each are atomic on local and Lustre file systems for lines well under the page size).

Each record carries:

``ts``        wall clock, seconds since the epoch (comparable across hosts)
``mono``      ``time.monotonic()`` (comparable across processes of one host only)
``host``      the writer's host name (a pod's hostname on Kubernetes)
``pid``       the writer's process id (in its host's, or pod's, PID namespace)
``rank``      global rank at the time of the event (-1 for the launcher / job layer)
``iteration`` NVRx in-process restart iteration (0 before any in-process restart)
``restart``   ft_launcher / torchrun restart count (``TORCHELASTIC_RESTART_COUNT``)
``attempt``   Kubernetes pod attempt (``JOB_ATTEMPT``: the index's earlier pods, counted or not; 0 locally)
``relaunch``  how often the pod's supervisor relaunched its launcher to rejoin (``POD_RELAUNCH``)
``layer``     the layer that emitted it: ``inprocess`` / ``ft_launcher`` / ``job``
``event``     one of :data:`EVENT_TYPES`, plus event-specific fields listed there.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from training.launch.prefork import LAUNCHER_PID_ENV

# The pod's supervisor runs ``python -m training.telemetry.events launch`` at every launch: only what that uses is
# imported, no dataclasses, typing or socket (80 -> 50 CPU-ms a command, 2026-12-04).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Event name -> the extra fields it carries.
EVENT_TYPES: dict[str, tuple[str, ...]] = {
    "launch": ("launcher", "nproc", "mode"),  # the launcher started workers (job layer; starts the wall clock)
    "start": ("world_size", "mode", "device"),  # a worker (re)entered (CUDA: + cuda_allocated_mb, _reserved_mb)
    "step": ("step", "loss", "tokens", "step_s"),  # an optimizer step completed (rank 0 only)
    "eval": ("step", "loss"),
    "ckpt_begin": ("step", "mode"),
    # training may continue; stall_s = time the loop was blocked (+ state_dict_s; NVRx: + plan_s, handoff_s)
    "ckpt_staged": ("step", "stall_s"),
    "ckpt_committed": ("step", "write_s", "path"),  # all ranks wrote, commit marker written
    "ckpt_failed": ("step", "error"),
    "ckpt_quarantined": ("step", "reason"),
    "fault_injected": ("kind", "step", "fault_rank"),
    "restart_begin": ("cause", "layer"),  # detection of a fault by a restart layer
    "restart_end": ("layer",),  # the layer finished restarting; training resumes
    # the memory tier readied its host slots (rank 0): s in all; reserve_s, populate_s, register_s; pieces registered
    "mem_prepare": ("nbytes", "s"),
    "mem_snapshot": ("step", "stall_s"),  # a memory-tier snapshot published (rank 0), or failed (any rank: error)
    # the memory tier's ``auto`` interval changed: interval (steps), cost_s (one snapshot's cost to the loop), step_s
    "mem_interval": ("step", "interval", "cost_s", "step_s"),
    "restore": ("from_step", "tier"),  # tier: "memory" | "shm" | "peer" | "storage" | "none"
    "phase": ("phase", "s"),  # a start-up phase of a worker (training.train's PHASES) took s seconds
    "hang_timeouts": ("soft_s", "hard_s", "step_s"),  # the step soft/hard timeouts derived from the step time
    "exit": ("reason", "code"),
}

LAYERS = ("inprocess", "ft_launcher", "job")
EVENTS_FILE = "events.jsonl"


def env_int(name: str, default: int = 0) -> int:
    """An integer environment variable; unset, empty or malformed gives ``default`` (the downward API gives "" for
    an annotation that is not set yet)."""
    try:
        return int(os.environ.get(name) or default)
    except ValueError:
        return default


class EventLog:
    """Appends events for one process. Cheap to construct; one ``write`` per event."""

    def __init__(self, run_dir: str | os.PathLike[str], rank: int = -1, layer: str = "job") -> None:
        self.path = Path(run_dir) / EVENTS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.layer = layer
        #: This machine's (or pod's) host name, read here and not at import: a worker forked from a template that
        #: imported this module elsewhere (the local cluster's warm pods) has its own pod's name.
        self.host = os.uname().nodename
        self.iteration = 0
        #: Callables that get every record after it is written (e.g. the CloudWatch EMF emitter).
        self.sinks: list[Callable[[dict[str, Any]], None]] = []
        #: A worker forked by training.launch.prefork: the pid its launcher knows (and logs), its stand-in's.
        self.launcher_pid = env_int(LAUNCHER_PID_ENV) if LAUNCHER_PID_ENV in os.environ else None

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event; unknown event names are a programming error."""
        if event not in EVENT_TYPES:
            raise ValueError(f"unknown event {event!r}; known: {', '.join(EVENT_TYPES)}")
        layer = fields.pop("emit_layer", self.layer)
        record = {
            "ts": time.time(),
            "mono": time.monotonic(),
            "host": self.host,
            "pid": os.getpid(),
            "rank": self.rank,
            "iteration": self.iteration,
            "restart": env_int("TORCHELASTIC_RESTART_COUNT"),
            "attempt": env_int("JOB_ATTEMPT"),
            "relaunch": env_int("POD_RELAUNCH"),
            "layer": layer,
            "event": event,
            **fields,
        }
        if self.launcher_pid is not None:
            record["launcher_pid"] = self.launcher_pid
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        for sink in self.sinks:
            sink(record)
        return record


class LoadedEvents:
    """The parsed event log and what had to be skipped (a plain class: see the imports)."""

    __slots__ = ("events", "malformed", "torn_lines")

    def __init__(self, events: list[dict[str, Any]], torn_lines: int = 0, malformed: int = 0) -> None:
        self.events = events
        self.torn_lines = torn_lines  # lines that are not JSON (a writer killed mid-line)
        self.malformed = malformed  # JSON lines without a finite numeric ``ts`` or a string ``event``


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
        ts = rec.get("ts") if isinstance(rec, dict) else None
        if (
            not isinstance(rec, dict)
            or not isinstance(rec.get("event"), str)
            or not isinstance(ts, int | float)
            or isinstance(ts, bool)
            or not math.isfinite(ts)
        ):
            malformed += 1
            continue
        events.append(rec)
    events.sort(key=lambda e: e["ts"])
    return LoadedEvents(events, torn, malformed)


def read_events(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All events of a run, ordered by wall clock; torn (a killed writer) and malformed lines are skipped."""
    path = Path(run_dir) / EVENTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no event log at {path}")
    return parse_event_lines(path.read_text(errors="replace").splitlines()).events


def main(argv: list[str] | None = None) -> int:
    """``python -m training.telemetry.events launch --run-dir DIR --launcher NAME --nproc N --mode MODE``.

    Records the ``launch`` event (job layer, rank -1) that starts the run's wall clock; the training pod's
    supervisor runs it before the launcher, so pod start-up counts against goodput (``training.local`` emits it
    itself).
    """
    import argparse

    parser = argparse.ArgumentParser(prog="training.telemetry.events", description=main.__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    launch = sub.add_parser("launch", help="record that a launcher is starting workers")
    launch.add_argument("--run-dir", type=Path, required=True)
    launch.add_argument("--launcher", required=True)
    launch.add_argument("--nproc", type=int, required=True)
    launch.add_argument("--mode", required=True)
    args = parser.parse_args(argv)
    node = os.environ.get("GROUP_RANK")
    EventLog(args.run_dir).emit(
        "launch", launcher=args.launcher, nproc=args.nproc, mode=args.mode, node=int(node) if node else None
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
