"""Each lost node's phases on the local cluster's EKS timeline, from the Job's status (``job.json``'s ``nodeLosses``,
written by training/cluster/eks_nodes.py): when, after the loss, the node turned NotReady, was fenced, its pod was
evicted and deleted, and its replacement started. The goodput report prints them under its faults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

JOB_STATUS = "job.json"
#: The phases in the order they usually come, with their column titles.
PHASES = (
    ("fenced", "fenced"),
    ("not_ready", "NotReady"),
    ("evicted", "evicted"),
    ("node_deleted", "Node deleted"),
    ("pod_gone", "pod gone"),
    ("replacement_started", "replacement"),
)


def node_losses(run_dir: Path) -> list[dict[str, Any]]:
    """The run's node losses (none without a ``job.json`` or with the fast timeline)."""
    path = Path(run_dir) / JOB_STATUS
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text()).get("nodeLosses") or [])
    except (json.JSONDecodeError, AttributeError):
        return []


def phase_lines(losses: list[dict[str, Any]]) -> list[str]:
    """A table of seconds after each loss (``-``: the phase did not happen), or nothing."""
    if not losses:
        return []
    header = ["#", "fault", "node", "index", *[title for _, title in PHASES], "on"]
    rows = [header]
    for i, loss in enumerate(losses, 1):
        phases = loss.get("phases_s", {})
        cells = [f"{phases[k]:.1f}" if k in phases else "-" for k, _ in PHASES]
        rows.append(
            [str(i), loss["fault"], loss["node"], str(loss["index"]), *cells, loss.get("replacement_node") or "-"]
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(header))]
    out = ["", "Node losses (EKS timeline, seconds after the loss; job.json)"]
    out += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out
