"""The managed AL2023 system node group."""

from __future__ import annotations

from stacks.system_node_group import MAX_SURGE_NODES
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import only


def test_al2023_managed_nodegroup(any_env: Synthesized) -> None:
    ng = only(any_env.template_json(any_env.platform.cluster), "AWS::EKS::Nodegroup")["Properties"]
    c = any_env.cfg.cluster
    assert ng["AmiType"] == "AL2023_x86_64_STANDARD"
    assert ng["InstanceTypes"] == [c.system_node_instance_type]
    assert ng["ScalingConfig"] == {
        "MinSize": c.system_node_count,
        "DesiredSize": c.system_node_count,
        "MaxSize": c.system_node_count + MAX_SURGE_NODES,
    }
    assert ng["Labels"] == c.system_node_labels == {"node-group": "system"}
    # No launch template: EKS attaches the cluster security group, which the FSx file system admits.
    assert "LaunchTemplate" not in ng and "RemoteAccess" not in ng
    assert "Taints" not in ng


def test_spreads_over_the_private_subnets(prod_env: Synthesized) -> None:
    ng = only(prod_env.template_json(prod_env.platform.cluster), "AWS::EKS::Nodegroup")["Properties"]
    assert sorted(ng["Subnets"]) == sorted(prod_env.cfg.network.private_subnets)
