"""The training Job on a local cluster (``training.local --nodes``): lost nodes at both indexes, an eviction and
in-pod faults in one run, which must end with the state of a fault-free run of the same size.

One shared run (inprocess-ft, 2 pods x 1 worker): an exception on rank 1 (in-process), a node lost at index 1 (the
rendezvous host's peer), a SIGKILL of rank 0's worker (ft_launcher), the node of index 0 lost (the rendezvous host
itself) and an eviction of index 1. The reference is a single-host, fault-free run on the very data the cluster's
dataset Job prepared: the cluster changes where the ranks run, not what they compute.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.cluster_schedule import FAULTS, STEPS, fault_free_reference, restarts_told, summary
from tests.helpers.training_runs import cluster_run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("cluster")
    faulted = cluster_run(base / "faulted", nodes=2, steps=STEPS, faults=FAULTS, timeout_s=420)
    reference = fault_free_reference(base / "faulted", base / "reference")
    return {"base": base, "faulted": faulted, "reference": reference}


def test_every_fault_is_survived_and_the_state_is_the_fault_free_one(runs):
    faulted, reference = runs["faulted"], runs["reference"]
    assert faulted.returncode == 0, faulted.stdout[-4000:] + faulted.stderr[-3000:]
    assert reference.returncode == 0, reference.stdout[-3000:] + reference.stderr[-3000:]
    got, want = summary(runs["base"] / "faulted"), summary(runs["base"] / "reference")
    assert got["final_step"] == STEPS and got["world_size"] == 2
    assert got["final_state_sha256"] == want["final_state_sha256"]
    # 2 node losses and an eviction (job), the exception (in-process), the SIGKILL (ft_launcher)
    assert got["restarts_by_layer"] == {"inprocess": 1, "ft_launcher": 1, "job": 3}, restarts_told(
        runs["base"] / "faulted"
    )
    # in-pod faults fire at their step; a node fault at the first step the cluster sees at or after its own
    kinds = sorted((f.split("@")[0], f.split("(")[1].rstrip(")")) for f in got["faults"])
    assert kinds == [("evict", "pod 1"), ("exception", "rank 1"), ("node-loss", "pod 0"), ("node-loss", "pod 1"),
                     ("sigkill", "rank 0")]  # fmt: skip


def test_the_job_status_counts_no_failure_for_lost_nodes_and_evictions(runs):
    status = json.loads((runs["base"] / "faulted" / "job.json").read_text())
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert (status["succeeded"], status["failed"], status["ignoredFailures"]) == (2, 0, 3)
    ignored = [p for p in status["pods"] if p["pod_failure_policy_action"] == "Ignore"]
    reasons = sorted((p["index"], c["reason"]) for p in ignored for c in p["conditions"])
    assert reasons == [(0, "DeletionByTaintManager"), (1, "DeletionByTaintManager"), (1, "EvictionByEvictionAPI")]
    final = {p["index"]: p for p in status["pods"] if p["pod_failure_policy_action"] == "Succeeded"}
    # the pod of index 1 that finished is its third: after the lost node's pod and the evicted one
    annotations = {i: final[i]["annotations"] for i in (0, 1)}
    assert final[1]["attempt"] == 2 and annotations[1]["batch.kubernetes.io/job-index-ignored-failure-count"] == "2"
    assert final[0]["attempt"] == 1 and annotations[0]["batch.kubernetes.io/job-index-ignored-failure-count"] == "1"
    assert annotations[0]["batch.kubernetes.io/job-index-failure-count"] == "0"


def test_a_replaced_node_restores_from_its_peer_s_memory(runs):
    """Every fault rolls back at most the memory tier's interval (5); the node lost at index 0 after the snapshot of
    step 25 comes back from the copy rank 1 holds of rank 0's snapshot (tier ``peer``), the survivors from their own
    /dev/shm, not from storage."""
    from training.telemetry.goodput import analyze, load_events

    events = load_events(runs["base"] / "faulted").events
    run = analyze(events)
    assert all(f.rollback_steps is not None and f.rollback_steps <= 5 for f in run.faults if f.injected)
    node0 = next(f for f in run.faults if f.kind == "node-loss" and f.pod == 0)
    assert (node0.restored_step, node0.restore_tier) == (25, "peer")
    restore = next(e for e in events if e["event"] == "restore" and e["from_step"] == 25 and e["tier"] == "peer")
    assert restore["per_rank_tier"] == ["peer", "shm"]


def test_the_report_gives_each_lost_node_to_the_job_layer(runs):
    from training.telemetry.goodput import analyze, load_events

    run = analyze(load_events(runs["base"] / "faulted").events)
    by_kind = {f.kind: f for f in run.faults if f.injected}
    for kind in ("node-loss", "evict"):
        fault = by_kind[kind]
        assert fault.layer == "job" and fault.pod is not None
        assert fault.recovery_s is not None and fault.recovery_s > 0
    layers = (by_kind["exception"].layer, by_kind["sigkill"].layer)
    assert layers == ("inprocess", "ft_launcher"), restarts_told(runs["base"] / "faulted")


def test_every_restart_names_the_fault_that_caused_it(runs):
    """A restart's cause is the newest fault injected before it: a node lost after an in-process recovery is
    ``node-loss``, not the exception recovered earlier (session 7's run said ``exception``)."""
    from training.telemetry.events import read_events

    newest, told = None, []
    for e in read_events(runs["base"] / "faulted"):
        if e["event"] == "fault_injected":
            newest = e["kind"]
        elif e["event"] == "restart_begin":
            told.append((e["layer"], e["cause"], newest))
    assert all(cause == newest for _, cause, newest in told), told
    assert {cause for _, cause, _ in told} == {"exception", "node-loss", "sigkill", "evict"}, told
