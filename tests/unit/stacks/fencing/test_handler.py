"""The fencing agent's rules on known node states, and what it reads from a Node object."""

from __future__ import annotations

from stacks.fencing.handler import OUT_OF_SERVICE, NodeView, decide, node_view


def view(**kw) -> NodeView:
    base = dict(
        name="n1",
        instance="i-1",
        ready="True",
        gpu_ok=True,
        unschedulable=False,
        out_of_service=False,
        ec2_state="running",
        lifecycle="InService",
        health="HEALTHY",
    )
    return NodeView(**{**base, **kw})


def test_a_healthy_node_is_left_alone():
    assert decide([view()]) == []


def test_notready_with_a_live_instance_is_cordoned_and_marked_unhealthy():
    assert decide([view(ready="Unknown")]) == [("cordon", "n1", "i-1"), ("unhealthy", "n1", "i-1")]
    # marked already, cordoned already: nothing twice
    assert decide([view(ready="Unknown", unschedulable=True, health="UNHEALTHY")]) == []


def test_a_gpu_fault_on_a_ready_node_is_fenced_and_drained_by_the_termination_handler():
    assert decide([view(gpu_ok=False)]) == [("cordon", "n1", "i-1"), ("unhealthy", "n1", "i-1")]
    # its hook is the termination handler's to complete (a Ready node can be drained)
    assert decide([view(gpu_ok=False, unschedulable=True, lifecycle="Terminating:Wait", health="UNHEALTHY")]) == []


def test_an_unreachable_nodes_hook_is_completed_and_a_gone_instance_is_tainted_out_of_service():
    waiting = view(ready="Unknown", unschedulable=True, lifecycle="Terminating:Wait", health="UNHEALTHY")
    assert decide([waiting]) == [("complete-hook", "n1", "i-1")]
    gone = view(ready="Unknown", ec2_state="shutting-down", lifecycle="Terminating", health="UNHEALTHY")
    assert decide([gone]) == [("taint", "n1", "i-1")]
    assert decide([view(ready="Unknown", ec2_state="terminated", out_of_service=True)]) == []


def test_node_view_reads_the_instance_conditions_and_taints():
    node = {
        "metadata": {"name": "ip-10-0-1-5"},
        "spec": {"providerID": "aws:///us-west-2b/i-0abc", "unschedulable": True, "taints": [OUT_OF_SERVICE]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "Unknown"},
                {"type": "AcceleratedHardwareReady", "status": "False"},
            ]
        },
    }
    got = node_view(node, {"i-0abc": "running"}, {"i-0abc": ("InService", "HEALTHY")})
    assert got == NodeView("ip-10-0-1-5", "i-0abc", "Unknown", False, True, True, "running", "InService", "HEALTHY")
    assert node_view(node, {}, {}) is None  # not an instance of the group: never touched
