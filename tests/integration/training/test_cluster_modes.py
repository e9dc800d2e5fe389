"""The other recovery modes on the local cluster: the schedule of ``test_cluster_node_faults.py`` (an exception, a
SIGKILL, the node of each index lost, an eviction) in modes ``ft-launcher``, ``inprocess`` and ``async-ckpt``.

Each must end with the fault-free state, with every fault recovered by the layer ``docs/recovery-layers.md`` names
for its mode, and with the Job counting no failure for the lost nodes and the eviction. ``inprocess-ft`` is
``test_cluster_node_faults.py``'s run. ``sync-ckpt`` and ``k8s-only`` recover every fault as ``async-ckpt`` does
(torchrun, then the job layer) and differ only in how they write checkpoints; the unrecoverable exit 42 is covered
per launcher kind by ``tests/integration/charts/test_launch_command.py`` (torchrun and ft_launcher) and up to the
Failed Job by ``test_cluster_fail_job.py``. The three runs share one fixture and run at once: each mostly waits (a
replacement pod after its node-replace delay, a rendezvous), about 25 CPU-s each.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.helpers.cluster_schedule import FAULTS, STEPS, fault_free_reference, restarts_told, summary
from tests.helpers.training_runs import cluster_run

pytestmark = pytest.mark.integration

#: The restarts per layer of FAULTS in each mode, from docs/recovery-layers.md's table: the exception and the SIGKILL
#: go to the mode's layers, the two lost nodes and the eviction to the job layer.
LAYERS = {
    "ft-launcher": {"inprocess": 0, "ft_launcher": 2, "job": 3},  # exception and SIGKILL: ft_launcher
    "inprocess": {"inprocess": 1, "ft_launcher": 0, "job": 4},  # exception in-process; SIGKILL ends the pod (torchrun)
    "async-ckpt": {"inprocess": 0, "ft_launcher": 0, "job": 5},  # torchrun: every fault ends a pod
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("cluster-modes")
    with ThreadPoolExecutor(len(LAYERS)) as pool:
        futures = {
            mode: pool.submit(cluster_run, base / mode, nodes=2, steps=STEPS, faults=FAULTS, mode=mode, timeout_s=420)
            for mode in LAYERS
        }
        procs = {mode: f.result() for mode, f in futures.items()}
    reference = fault_free_reference(base / "async-ckpt", base / "reference")
    assert reference.returncode == 0, reference.stdout[-3000:] + reference.stderr[-3000:]
    return {"base": base, "procs": procs}


@pytest.mark.parametrize("mode", list(LAYERS))
def test_every_fault_is_survived_by_its_layer_and_the_state_is_the_fault_free_one(runs, mode):
    proc, run_dir = runs["procs"][mode], runs["base"] / mode
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    got, want = summary(run_dir), summary(runs["base"] / "reference")
    assert (got["final_step"], got["world_size"]) == (STEPS, 2)
    assert got["final_state_sha256"] == want["final_state_sha256"]
    assert got["restarts_by_layer"] == LAYERS[mode], restarts_told(run_dir)


@pytest.mark.parametrize("mode", list(LAYERS))
def test_lost_nodes_and_the_eviction_count_no_failure(runs, mode):
    """Two lost nodes and an eviction are ignored failures (podFailurePolicy ``Ignore`` on ``DisruptionTarget``) in
    every mode; an in-pod fault that the mode leaves to the job layer ends its pod and counts (``Count``): none in
    ft-launcher, the SIGKILL in inprocess (exit 137), the SIGKILL and the exception in async-ckpt."""
    status = json.loads((runs["base"] / mode / "job.json").read_text())
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    counted = {"ft-launcher": 0, "inprocess": 1, "async-ckpt": 2}[mode]
    assert (status["succeeded"], status["failed"], status["ignoredFailures"]) == (2, counted, 3)


@pytest.mark.parametrize("mode", list(LAYERS))
def test_the_report_gives_each_node_fault_to_the_job_layer(runs, mode):
    from training.telemetry.goodput import analyze, load_events

    run = analyze(load_events(runs["base"] / mode).events)
    node_faults = [f for f in run.faults if f.injected and f.kind in ("node-loss", "evict")]
    assert sorted((f.kind, f.pod) for f in node_faults) == [("evict", 1), ("node-loss", 0), ("node-loss", 1)]
    assert all(f.layer == "job" and f.recovery_s is not None and f.recovery_s > 0 for f in node_faults)
