"""The shared EKS node role: EC2 trust, the documented managed policies, reasoned IAM4 acknowledgements."""

from __future__ import annotations

from stacks.node_role import NODE_ROLE_POLICIES
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import resources


def test_both_node_groups_use_the_node_role(default_env: Synthesized) -> None:
    node_roles = [
        r["Properties"]
        for stack in (default_env.platform.cluster, default_env.platform.gpu)  # system nodes, GPU nodes
        for r in resources(default_env.template_json(stack), "AWS::IAM::Role").values()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    ]
    assert len(node_roles) == 2
    for role in node_roles:
        text = str(role["ManagedPolicyArns"])
        assert all(f"policy/{p}" in text for p in NODE_ROLE_POLICIES)
