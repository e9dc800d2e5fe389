"""The EKS node-loss timeline's rules on a fake clock: every time below is worked out by hand from the defaults
(Lease renewed every 10 s, node monitor every 5 s with a 50 s grace, PodGC every 20 s with a 40 s quarantine, a
60 s toleration, fencing polled every 5 s after a 20 s stale Lease, a 600 s new node), all loops ticking from 0."""

from __future__ import annotations

import pytest

from training.cluster.node_timeline import OUT_OF_SERVICE, EksTimeline, NodePool, next_tick

NO_FENCE = EksTimeline(fence=False)


def run(pool: NodePool, until: float) -> list[tuple[float, str, str]]:
    """Advance one second at a time (as a polling runner would) and keep (time, kind, subject)."""
    out = []
    t = 0.0
    while t <= until:
        out += [(h.at, h.kind, h.subject) for h in pool.advance(t)]
        t += 1.0
    return out


def two_pods(timeline: EksTimeline, nodes: int = 2) -> NodePool:
    pool = NodePool(timeline, nodes)
    pool.bind("p0", "gpu-node-1", 60)
    pool.bind("p1", "gpu-node-2", 60)
    return pool


def test_ticks_are_multiples_of_the_period_from_the_origin() -> None:
    assert next_tick(80.0, 5.0) == 80.0
    assert next_tick(80.5, 5.0) == 85.0
    assert next_tick(61.0, 20.0, origin=1.0) == 61.0
    assert next_tick(62.0, 20.0, origin=1.0) == 81.0


def test_a_terminated_instance_without_fencing_ends_its_pod_at_podgc_after_the_quarantine() -> None:
    pool = two_pods(NO_FENCE)
    pool.lose("gpu-node-2", 33.0, instance="terminated")  # Lease last renewed at 30
    seen = run(pool, 700)
    assert seen == [
        (33.0, "InstanceTerminated", "gpu-node-2"),
        (80.0, "NotReady", "gpu-node-2"),  # 30 + 50
        (80.0, "NodeDeleted", "gpu-node-2"),  # the cloud controller's next pass after NotReady
        (120.0, "PodGone", "p1"),  # quarantined at the 80 s pass, deleted at the first pass 40 s later
        (633.0, "NodeJoined", "gpu-node-3"),  # 33 + 600
    ]
    assert pool.pods["p1"].disruption == "DeletionByPodGC"  # before the taint manager's 80 + 60 = 140


def test_a_hung_instance_without_fencing_keeps_its_pod_terminating_for_good() -> None:
    pool = two_pods(NO_FENCE)
    pool.lose("gpu-node-2", 33.0, instance="hung")
    seen = run(pool, 3000)
    assert seen == [(80.0, "NotReady", "gpu-node-2"), (140.0, "Evicted", "p1")]  # 80 + the 60 s toleration
    assert pool.pods["p1"].gone_at is None  # no Node deletion, no PodGC: the index is never replaced
    assert pool.free() == []


def test_fencing_on_a_stale_lease_and_a_lost_peer_frees_the_index_at_the_first_podgc_pass_after_notready() -> None:
    pool = two_pods(EksTimeline())
    pool.lose("gpu-node-2", 33.0, instance="hung")
    pool.peer_lost(38.0)  # a worker on gpu-node-1 reported a lost peer
    seen = run(pool, 700)
    assert seen == [
        (50.0, "Fenced", "gpu-node-2"),  # max(30 + 20, 38) = 50, a poll tick
        (55.0, "InstanceTerminated", "gpu-node-2"),  # + fence_terminate_s
        (55.0, "OutOfService", "gpu-node-2"),
        (55.0, "Evicted", "p1"),  # the out-of-service taint is not tolerated
        (80.0, "NotReady", "gpu-node-2"),
        (80.0, "NodeDeleted", "gpu-node-2"),
        (80.0, "PodGone", "p1"),  # terminating, NotReady, out-of-service: the 80 s pass
        (655.0, "NodeJoined", "gpu-node-3"),
    ]
    assert OUT_OF_SERVICE in pool.nodes["gpu-node-2"].taints


def test_fencing_a_terminated_instance_taints_it_without_terminating_it_again() -> None:
    pool = two_pods(EksTimeline())
    pool.lose("gpu-node-2", 41.0, instance="terminated")  # Lease 40, NotReady 90
    pool.peer_lost(47.0)
    seen = run(pool, 200)
    assert seen == [
        (41.0, "InstanceTerminated", "gpu-node-2"),
        (60.0, "Fenced", "gpu-node-2"),  # 40 + 20
        (60.0, "OutOfService", "gpu-node-2"),
        (60.0, "Evicted", "p1"),
        (90.0, "NotReady", "gpu-node-2"),
        (90.0, "NodeDeleted", "gpu-node-2"),
        (100.0, "PodGone", "p1"),  # the first PodGC pass after NotReady
    ]


def test_without_the_jobs_signal_a_hung_node_is_fenced_once_notready() -> None:
    pool = two_pods(EksTimeline())
    pool.lose("gpu-node-2", 33.0, instance="hung")
    seen = run(pool, 120)
    assert seen[:6] == [
        (80.0, "NotReady", "gpu-node-2"),
        (80.0, "Fenced", "gpu-node-2"),
        (85.0, "InstanceTerminated", "gpu-node-2"),
        (85.0, "OutOfService", "gpu-node-2"),
        (85.0, "Evicted", "p1"),
        (85.0, "NodeDeleted", "gpu-node-2"),
    ]
    assert seen[6] == (100.0, "PodGone", "p1")


def test_a_peer_loss_before_the_node_went_silent_is_no_signal() -> None:
    pool = two_pods(EksTimeline())
    pool.peer_lost(12.0)
    pool.lose("gpu-node-2", 33.0, instance="hung")  # Lease 30: the signal at 12 is older
    assert run(pool, 79) == []


def test_the_replacement_takes_the_spare_or_waits_for_the_new_node() -> None:
    spare = two_pods(NO_FENCE, nodes=3)
    spare.lose("gpu-node-2", 33.0, instance="terminated")
    run(spare, 120)
    assert [n.name for n in spare.free()] == ["gpu-node-3"]

    none = two_pods(NO_FENCE)
    none.lose("gpu-node-2", 33.0, instance="terminated")
    run(none, 632)
    assert none.free() == []  # Pending: FailedScheduling until the new instance joins
    run(none, 633)
    assert [n.name for n in none.free()] == ["gpu-node-3"]


def test_a_counted_failures_replacement_returns_to_its_node_when_it_is_the_only_free_one() -> None:
    pool = two_pods(NO_FENCE)
    pool.release("p1", 50.0)  # exited non-zero on a node that still answers
    assert [n.name for n in pool.free()] == ["gpu-node-2"]
    with_spare = two_pods(NO_FENCE, nodes=3)
    with_spare.release("p1", 50.0)
    assert [n.name for n in with_spare.free()] == ["gpu-node-3", "gpu-node-2"]  # free the longest first


def test_a_cordoned_or_tainted_node_takes_no_pod() -> None:
    pool = NodePool(NO_FENCE, 2)
    pool.cordon("gpu-node-1")
    assert [n.name for n in pool.free()] == ["gpu-node-2"]


def test_a_drained_node_goes_and_a_new_one_comes() -> None:
    pool = two_pods(NO_FENCE)
    pool.release("p1", 100.0)
    pool.terminate("gpu-node-2", 100.0)
    assert run(pool, 700) == [
        (100.0, "InstanceTerminated", "gpu-node-2"),
        (150.0, "NotReady", "gpu-node-2"),
        (150.0, "NodeDeleted", "gpu-node-2"),
        (700.0, "NodeJoined", "gpu-node-3"),
    ]


def test_a_gpu_fault_on_a_ready_node_is_cordoned_so_the_replacement_lands_elsewhere_then_the_node_goes() -> None:
    pool = two_pods(EksTimeline(), nodes=3)
    pool.gpu_fault("gpu-node-2", 33.0)  # the node stays Ready; its pod fails at once (a counted failure)
    pool.release("p1", 34.0)
    seen = run(pool, 700)
    assert seen == [
        (35.0, "Fenced", "gpu-node-2"),  # the next poll after the condition
        (35.0, "InstanceTerminated", "gpu-node-2"),  # drained (its pod already gone), then terminated
        (35.0, "OutOfService", "gpu-node-2"),
        (85.0, "NotReady", "gpu-node-2"),
        (85.0, "NodeDeleted", "gpu-node-2"),
        (635.0, "NodeJoined", "gpu-node-4"),
    ]
    assert [n.name for n in pool.free()] == ["gpu-node-3", "gpu-node-4"]  # never the faulty node again

    unfenced = two_pods(NO_FENCE)  # no spare, no fencing: the replacement returns to the faulty node
    unfenced.gpu_fault("gpu-node-2", 33.0)
    unfenced.release("p1", 34.0)
    run(unfenced, 700)
    assert [n.name for n in unfenced.free()] == ["gpu-node-2"]


def test_durations_are_overridable_and_checked() -> None:
    tl = EksTimeline().with_overrides(["provision_s=30", "fence=0", "node_monitor_grace_s=40"])
    assert (tl.provision_s, tl.fence, tl.node_monitor_grace_s, tl.podgc_period_s) == (30.0, False, 40.0, 20.0)
    with pytest.raises(ValueError, match="KEY one of lease_renew_s"):
        EksTimeline().with_overrides(["grace=1"])
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        EksTimeline().with_overrides(["provision_s=-1"])
    with pytest.raises(ValueError, match="is not a number"):
        EksTimeline().with_overrides(["provision_s=soon"])
