"""The GPU stack: its own lifecycle (nothing depends on it), outputs and a normalised snapshot."""

from __future__ import annotations

from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import check_golden, normalise
from tests.unit.stacks.test_cluster_stack import env_name


def test_depends_only_on_the_cluster_and_nothing_on_it(any_env: Synthesized) -> None:
    p = any_env.platform
    assert p.gpu.dependencies == [p.cluster]
    for other in (p.cluster, p.storage, p.image):
        assert p.gpu not in other.dependencies


def test_outputs(any_env: Synthesized) -> None:
    outputs = any_env.template_json(any_env.platform.gpu)["Outputs"]
    assert outputs["GpuAutoScalingGroupName"]["Value"] == {"Ref": "GpuNodesAutoScalingGroup481E5AE1"}
    assert outputs["NodeTerminationQueueUrl"]["Value"]["Ref"].startswith("NodeTerminationHandlerQueue")


def test_snapshot(any_env: Synthesized) -> None:
    check_golden(
        f"stacks/{env_name(any_env)}/gpu.template.json", normalise(any_env.template_json(any_env.platform.gpu))
    )
