"""The local cluster's nodes on the EKS timeline, with the Job controller and a fake clock (no pods run): where pods
land, when a lost node's index may be replaced, the phases recorded per loss, and drains against the budget."""

from __future__ import annotations

from dataclasses import replace

from tests.unit.training.cluster.test_pods import job as pods_job
from training.cluster.controller import JobController
from training.cluster.eks_nodes import EksNodes
from training.cluster.manifest import DisruptionBudget, JobManifest, PodFailurePolicyRule
from training.cluster.node_timeline import EksTimeline


def job() -> JobManifest:
    """test_pods' two-index Job, named ``j``, ignoring ``DisruptionTarget``, tolerating a lost node for 60 s."""
    ignore = PodFailurePolicyRule("Ignore", conditions=(("DisruptionTarget", "True"),))
    return replace(pods_job(), name="j", rules=[ignore], node_failure_toleration_s=60)


def started(spares: int, budget: DisruptionBudget | None = None, timeline: EksTimeline | None = None):
    lines: list[str] = []
    nodes = EksNodes(timeline or EksTimeline(), job(), budget, spares=spares, start=0.0, say=lines.append)
    ctl = JobController(nodes.job, backoff_base_s=1.0, backoff_max_s=36.0)
    for index in ctl.due(0.0):
        node = nodes.place(index, 0.0)
        nodes.bind(ctl.create(index, 0.0, node=node), node)
    return nodes, ctl, lines


def tick_until(nodes: EksNodes, ctl: JobController, until: float) -> None:
    t = 0.0
    while t <= until:
        nodes.tick(t, ctl)
        t += 1.0


def test_a_lost_nodes_index_is_replaced_on_the_spare_once_podgc_deleted_its_pod() -> None:
    nodes, ctl, lines = started(spares=1)
    pod = ctl.indexes[1].pod
    assert (ctl.indexes[0].pod.node, pod.node) == ("gpu-node-1", "gpu-node-2")
    nodes.lose("node-loss@30:1", pod, 33.0, instance="terminated")
    tick_until(nodes, ctl, 79)
    assert ctl.due(79.0) == [] and pod.terminal_at is None  # still Terminating: no replacement yet
    tick_until(nodes, ctl, 80)
    assert (pod.terminal_at, pod.action, pod.reasons["DisruptionTarget"]) == (80.0, "Ignore", "DeletionByTaintManager")
    assert ctl.due(81.0) == [1]  # the back-off (1 s, from when the pod ended) has passed
    node = nodes.place(1, 81.0)
    assert node == "gpu-node-3"
    nodes.bind(ctl.create(1, 81.0, node=node), node)
    (loss,) = nodes.report()
    assert loss["phases_s"] == {
        "lost": 0.0,
        "not_ready": 47.0,  # Lease 30 + 50, at the 80 s monitor pass
        "fenced": 47.0,  # NotReady; the instance is already gone
        "out_of_service": 47.0,
        "evicted": 47.0,
        "node_deleted": 47.0,
        "pod_gone": 47.0,  # PodGC's 80 s pass: out-of-service, terminating, NotReady
        "instance_terminated": 0.0,
        "replacement_started": 48.0,
    }
    assert (loss["replacement_node"], loss["index"]) == ("gpu-node-3", 1)
    assert any("EKS   +  80.0s PodGone j-1-" in line for line in lines)


def test_without_a_spare_the_index_is_pending_until_the_new_node_joins() -> None:
    nodes, ctl, lines = started(spares=0)
    nodes.lose("node-loss@30:1", ctl.indexes[1].pod, 33.0, instance="terminated")
    tick_until(nodes, ctl, 632)
    assert nodes.place(1, 600.0) is None
    assert nodes.place(1, 601.0) is None  # said once
    assert [x for x in lines if "FailedScheduling" in x] == [
        "JOB   index 1 Pending: FailedScheduling: 0/2 nodes are available "
        "(a training pod needs a whole free Ready node)"
    ]
    tick_until(nodes, ctl, 633)
    assert nodes.place(1, 633.0) == "gpu-node-3"
    assert lines[-1] == "JOB   index 1 scheduled after 33.0 s Pending"


def test_the_jobs_lost_peer_signal_fences_a_hung_node_before_notready() -> None:
    nodes, ctl, _ = started(spares=1)
    nodes.lose("node-hang@30:1", ctl.indexes[1].pod, 33.0, instance="hung")
    nodes.event({"event": "exit", "code": 14, "rank": 3, "ts": 38.0}, nproc=2)  # rank 3 is on the lost pod: no signal
    nodes.event({"event": "step", "rank": 0, "ts": 38.0}, nproc=2)  # not a lost peer
    assert nodes.pool.peer_lost_at is None
    nodes.event({"event": "exit", "code": 14, "rank": 1, "ts": 38.0}, nproc=2)
    tick_until(nodes, ctl, 120)
    assert nodes.report()[0]["phases_s"]["fenced"] == 17.0  # Lease 30 + 20 = 50
    assert ctl.indexes[1].pod.terminal_at == 80.0


def test_a_drain_is_refused_by_a_zero_budget_until_it_times_out_and_admitted_by_a_budget_of_one() -> None:
    zero = DisruptionBudget("j", 0, {})
    nodes, ctl, lines = started(spares=1, budget=zero)
    pod = ctl.indexes[1].pod
    assert nodes.drain("evict@30:1", pod, 10.0, unavailable=0) is False
    assert "eviction of j-1-" in lines[-1] and "refused (429: PodDisruptionBudget j maxUnavailable 0)" in lines[-1]
    assert nodes.step(99.0, ctl) == []
    assert nodes.step(100.0, ctl) == [("gone", pod, "drain timeout of gpu-node-2")]  # 10 + 30 s grace + 60 s margin

    one = DisruptionBudget("j", 1, {})
    nodes, ctl, _ = started(spares=1, budget=one)
    pod = ctl.indexes[1].pod
    assert nodes.drain("evict@30:1", pod, 10.0, unavailable=0) is True
    assert [n.name for n in nodes.pool.free()] == ["gpu-node-3"]  # gpu-node-2 is cordoned
    nodes.ended(pod, 25.0)  # the pod stopped within its grace period: then the instance goes
    assert nodes.pool.nodes["gpu-node-2"].instance == "terminated"
    assert nodes.report()[0]["phases_s"] == {"drain_started": 0.0, "evicted": 0.0, "pod_gone": 15.0}


def test_a_gpu_fault_kills_the_pods_on_its_node_until_the_node_is_fenced() -> None:
    nodes, ctl, _ = started(spares=1)
    pod = ctl.indexes[1].pod
    nodes.gpu_fault("gpu-fault@30:1", pod, 33.0)
    assert nodes.step(33.0, ctl) == [("kill", pod, "")]
    assert nodes.step(33.5, ctl) == []  # killed once
    ctl.terminated(pod, 137, 34.0)  # the runner reaped it: a counted failure
    nodes.ended(pod, 34.0)
    nodes.step(35.0, ctl)  # the fencing agent's poll: cordoned
    assert nodes.place(1, 35.0) == "gpu-node-3"  # the spare, never the faulty node
    phases = {"gpu_fault": 0.0, "fenced": 2.0, "instance_terminated": 2.0, "out_of_service": 2.0}  # the 35 s poll
    assert (pod.action, nodes.report()[0]["phases_s"]) == ("Count", phases)
