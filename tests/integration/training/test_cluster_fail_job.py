"""The training Job on a local cluster ends Failed, with the FailJob reason, when a fault repeats past
``faults.max_repeats``: k8s-only, 2 pods x 1 worker, a sticky exception on rank 1 (it fires after every recovery).

Rank 1's pod ends with the fault's own code (10): counted, replaced. The replacement hits the fault again (10,
counted); the third pod's rank finds the fault twice in its failure ledger (2 > max_repeats = 1) and exits 42:
podFailurePolicy FailJob, and the other pod is terminated. Index 0 never failed on its own: its supervisor
relaunched in place each time it lost its peer.
"""

from __future__ import annotations

import copy
import json

import pytest

from tests.helpers.training_runs import FAST_CONFIG, cluster_run

pytestmark = pytest.mark.integration


def test_a_repeated_fault_fails_the_job_with_the_fail_job_reason(tmp_path):
    config = copy.deepcopy(FAST_CONFIG)
    config["faults"] = {"max_repeats": 1}
    proc = cluster_run(tmp_path / "run", nodes=2, steps=12, faults="exception@3:1!", mode="k8s-only", config=config)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 42, out[-4000:]
    assert "Job Failed: PodFailurePolicy" in proc.stdout
    status = json.loads((tmp_path / "run" / "job.json").read_text())
    assert status["conditions"][-1]["type"] == "Failed" and status["conditions"][-1]["reason"] == "PodFailurePolicy"
    index1 = [p for p in status["pods"] if p["index"] == 1]
    got = [(p["exit_code"], p["pod_failure_policy_action"]) for p in index1]
    assert got == [(10, "Count"), (10, "Count"), (42, "FailJob")]
    assert [p["annotations"]["batch.kubernetes.io/job-index-failure-count"] for p in index1] == ["0", "1", "2"]
    (index0,) = [p for p in status["pods"] if p["index"] == 0]  # one pod: it relaunched in place, never replaced
    assert index0["pod_failure_policy_action"] != "Succeeded"
