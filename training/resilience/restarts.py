"""Which layer restarted this worker, and for which fault: read from the environment the launchers set, the run's
persisted fault state and this rank's previous start (``<run_dir>/faults/start.rank<R>.json``)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from training.common.files import atomic_write_json
from training.telemetry.events import env_int


def newest_fault_since(run_dir: Path, since_ns: int) -> str | None:
    """Kind of the newest fault (any rank) fired after ``since_ns``, from the persisted fault state."""
    newest: tuple[int, str] | None = None
    for path in (run_dir / "faults").glob("fired.rank*.json"):
        with contextlib.suppress(json.JSONDecodeError, FileNotFoundError):
            for key, ns in json.loads(path.read_text()).items():
                if int(ns) > since_ns and (newest is None or int(ns) > newest[0]):
                    newest = (int(ns), key.split("@", 1)[0])
    return newest[1] if newest else None


def previous_start_ns(run_dir: Path, rank: int) -> int:
    """When the previous process of this rank started (0 if none); records this start."""
    path = run_dir / "faults" / f"start.rank{rank}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        prev = int(json.loads(path.read_text())["ns"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        prev = 0
    atomic_write_json(path, {"ns": time.time_ns()})
    return prev


def restart_layer(
    layers: Any, run_dir: Path, entered_ns: int, iteration: int, inprocess_cause: str | None
) -> tuple[str, str] | None:
    """(layer, cause) if this entry of the training function is a recovery, else None.

    ``entered_ns``: when this rank last entered (an earlier process's start, or this process's previous in-process
    iteration). The job layer covers a replacement pod (``JOB_ATTEMPT`` > 0: earlier pods of this index failed or were
    lost) and a launcher its pod's supervisor relaunched to rejoin after a peer was lost (``POD_RELAUNCH`` > 0).
    """
    if iteration > 0:
        return "inprocess", newest_fault_since(run_dir, entered_ns) or inprocess_cause or "peer_fault"
    # This rank already started once during the pod's current launch (the supervisor's POD_LAUNCH_NS): its launcher
    # restarted the workers, counted (TORCHELASTIC_RESTART_COUNT) or to let a new node in (a membership change, which
    # the count does not show).
    again = entered_ns > env_int("POD_LAUNCH_NS") > 0
    if layers.ft_launcher and (env_int("TORCHELASTIC_RESTART_COUNT") > 0 or again):
        return "ft_launcher", newest_fault_since(run_dir, entered_ns) or "worker_failure"
    if again:  # torchrun: a membership change, part of the job layer's recovery
        return "job", newest_fault_since(run_dir, entered_ns) or "peer_lost"
    if (env_int("JOB_ATTEMPT") > 0 or env_int("POD_RELAUNCH") > 0) and entered_ns:
        default = "peer_lost" if env_int("POD_RELAUNCH") > 0 else "pod_failure"
        return "job", newest_fault_since(run_dir, entered_ns) or default
    return None
