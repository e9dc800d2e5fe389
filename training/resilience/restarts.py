"""Which layer restarted this worker, and for which fault: read from the environment the launchers set, the run's
persisted fault state, the exit status a worker of this launch recorded, and this rank's last entry into training
(``<run_dir>/faults/start.rank<R>.json``).

The fault state is every ``<run_dir>/faults/fired.*.json``: each rank's injector writes ``fired.rank<R>.json``, the
local cluster's controller writes :data:`NODE_FAULTS_FILE` for the node faults it fires. A fault is the cause of a
restart only if it fired after the rank's last entry: one that an earlier restart already recovered is not.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from training.common.files import atomic_write_json
from training.resilience.exit_codes import EXIT_STATUS_FILE, read_exit_status
from training.telemetry.events import env_int

#: The node faults (node loss, eviction) the local cluster's controller fired: fault key -> ns, as a rank's record.
NODE_FAULTS_FILE = "fired.nodes.json"


def newest_fault_since(run_dir: Path, since_ns: int) -> str | None:
    """Kind of the newest fault (any rank, or a node) fired after ``since_ns``, from the persisted fault state."""
    newest: tuple[int, str] | None = None
    for path in (run_dir / "faults").glob("fired.*.json"):
        with contextlib.suppress(json.JSONDecodeError, FileNotFoundError):
            for key, ns in json.loads(path.read_text()).items():
                if int(ns) > since_ns and (newest is None or int(ns) > newest[0]):
                    newest = (int(ns), key.split("@", 1)[0])
    return newest[1] if newest else None


def recorded_cause_since(run_dir: Path, since_ns: int) -> str | None:
    """The cause a worker of this launch recorded at its exit (``exit_status.json``) after ``since_ns``: why
    ft_launcher restarted the workers when no injected fault says (a storage error, the code's own exception). Not
    ``peer_lost``: that is a survivor's view of a rank that recorded nothing (SIGKILLed)."""
    try:
        if (run_dir / EXIT_STATUS_FILE).stat().st_mtime_ns <= since_ns:
            return None
    except FileNotFoundError:
        return None
    status = read_exit_status(run_dir) or {}
    cause = status.get("cause")
    return str(cause) if cause and cause != "peer_lost" else None


def previous_start_ns(run_dir: Path, rank: int) -> int:
    """When this rank last entered training in an earlier process (0 if never); records this process's start."""
    path = _entry_path(run_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        prev = int(json.loads(path.read_text())["ns"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        prev = 0
    record_entry(run_dir, rank, time.time_ns())
    return prev


def record_entry(run_dir: Path, rank: int, ns: int) -> None:
    """This rank entered (or re-entered, after an in-process restart) the training function at ``ns``."""
    atomic_write_json(_entry_path(run_dir, rank), {"ns": ns})


def record_node_fault(run_dir: Path, key: str, ns: int) -> None:
    """The local cluster's controller fired node fault ``key`` (``node-loss@40:1``) at ``ns``."""
    path = run_dir / "faults" / NODE_FAULTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fired = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        fired = {}
    atomic_write_json(path, {**fired, key: ns})


def _entry_path(run_dir: Path, rank: int) -> Path:
    return run_dir / "faults" / f"start.rank{rank}.json"


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
        cause = newest_fault_since(run_dir, entered_ns) or recorded_cause_since(run_dir, entered_ns)
        return "ft_launcher", cause or "worker_failure"
    if again:  # torchrun: a membership change, part of the job layer's recovery
        return "job", newest_fault_since(run_dir, entered_ns) or "peer_lost"
    if (env_int("JOB_ATTEMPT") > 0 or env_int("POD_RELAUNCH") > 0) and entered_ns:
        default = "peer_lost" if env_int("POD_RELAUNCH") > 0 else "pod_failure"
        return "job", newest_fault_since(run_dir, entered_ns) or default
    return None
