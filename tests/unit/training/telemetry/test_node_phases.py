"""The node losses' phases the goodput report prints, from a job.json of the local cluster's EKS timeline."""

from __future__ import annotations

import json
from pathlib import Path

from training.telemetry.node_phases import node_losses, phase_lines

LOSS = {
    "fault": "node-loss@30:1",
    "node": "gpu-node-2",
    "pod": "fsdp-train-inprocess-ft-1-so3vf",
    "index": 1,
    "at_s": 21.788,
    "phases_s": {"lost": 0.0, "fenced": 18.212, "not_ready": 48.212, "evicted": 18.212, "node_deleted": 48.212,
                 "pod_gone": 58.212, "replacement_started": 59.285},
    "replacement_node": "gpu-node-3",
}  # fmt: skip


def test_the_phases_of_each_loss_in_seconds_after_it(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text(json.dumps({"conditions": [], "nodeLosses": [LOSS]}))
    assert phase_lines(node_losses(tmp_path)) == [
        "",
        "Node losses (EKS timeline, seconds after the loss; job.json)",
        "  #  fault           node        index  fenced  NotReady  evicted  Node deleted  pod gone  replacement  on",
        "  1  node-loss@30:1  gpu-node-2  1      18.2    48.2      18.2     48.2          58.2      59.3         "
        "gpu-node-3",
    ]


def test_nothing_without_losses(tmp_path: Path) -> None:
    assert node_losses(tmp_path) == [] and phase_lines([]) == []
    (tmp_path / "job.json").write_text(json.dumps({"conditions": []}))  # the fast timeline writes none
    assert node_losses(tmp_path) == []
    hung = {**LOSS, "phases_s": {"lost": 0.0, "not_ready": 41.0, "evicted": 101.0}, "replacement_node": None}
    assert phase_lines([hung])[-1].split() == [
        "1",
        "node-loss@30:1",
        "gpu-node-2",
        "1",
        "-",
        "41.0",
        "101.0",
        "-",
        "-",
        "-",
        "-",
    ]
