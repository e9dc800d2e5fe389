"""The local cluster's shared fault schedule (``tests/integration/training/test_cluster_*.py``), its fault-free
reference run, and what a failing assertion about its restarts needs to say."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

STEPS = 40
# An eviction takes effect within about a second (its pod must stop), while tiny CPU steps take milliseconds: it
# comes last, so that no other fault fires during its wind-down.
# The exception comes first, in the settled first world: on CI it once came 0.7 s after a replaced pod had rejoined
# and was recovered by ft_launcher instead of in-process (a slower recovery, not a wrong one; cause not found).
FAULTS = "exception@5:1,node-loss@12:1,sigkill@19:0,node-loss@26:0,evict@33:1"
#: Cluster runs of one test file at once. Each mostly waits (a replacement pod, a rendezvous, a back-off), but all
#: its pods start together and import torch: six runs at once on two cores made every start wait tens of seconds.
AT_ONCE = 3

T = TypeVar("T")


def run_each(keys: Iterable[str], run: Callable[[str], T], at_once: int = AT_ONCE) -> dict[str, T]:
    """``run(key)`` for every key, :data:`AT_ONCE` at a time; the results by key."""
    keys = list(keys)
    with ThreadPoolExecutor(at_once) as pool:
        return dict(zip(keys, pool.map(run, keys), strict=True))


def restarts_told(run_dir: Path) -> str:
    """What a failing layer assertion needs (a CI machine keeps nothing): every restart and exit event, and the pods'
    (or a single-host run's launcher's) log lines about restarts, exits, errors and discarded ranks."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    keep = ("restart_begin", "restart_end", "exit", "fault_injected")
    lines = [
        f"{e['ts']:.2f} rank {e['rank']} {e['layer']} {e['event']} {e.get('cause', e.get('kind', ''))}"
        for e in events
        if e["event"] in keep
    ]
    marks = ("restart", "Restart", "Error", "exit", "Terminated", "timed out", "Timed out", "Discarded", "terminated")
    for log in sorted((run_dir / "pods").glob("*.log")) + sorted(run_dir.glob("launcher.log")):  # a cluster's, a host's
        lines += [
            f"{log.stem}: {x[:300]}" for x in log.read_text(errors="replace").splitlines() if any(m in x for m in marks)
        ]
    return "\n".join(lines[-150:])


def fault_free_reference(cluster_dir: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """A single-host, fault-free k8s-only run of :data:`STEPS` on the data the dataset Job of the cluster run in
    ``cluster_dir`` prepared, with the cluster's schedule length (its ConfigMap carries ``train.steps``: the
    learning-rate schedule follows it): the cluster changes where the ranks run, not what they compute."""
    from tests.helpers.training_runs import FAST_CONFIG, local_run
    from training.cluster.runner import STATE_DIR

    data = next((cluster_dir / STATE_DIR / "claims").glob("*/data/*"))
    config = copy.deepcopy(FAST_CONFIG)
    config["train"].update(data_dir=str(data), steps=STEPS)
    return local_run(out, steps=STEPS, mode="k8s-only", config=config)


def summary(run_dir: Path) -> dict[str, Any]:
    """A run's ``summary.json``."""
    return json.loads((run_dir / "summary.json").read_text())
