"""Managed add-ons: the six add-ons, ordering around the node groups, FSx CSI Pod Identity, the node monitoring
agent's DCGM tolerating the GPU taint."""

from __future__ import annotations

import json

from stacks import node_fencing
from stacks.addons import FSX_CSI_SERVICE_ACCOUNT, NODE_MONITORING_AGENT
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import resources


def addons_by_name(env: Synthesized) -> dict[str, tuple[str, dict]]:
    tpl = env.template_json(env.platform.cluster)
    return {v["Properties"]["AddonName"]: (k, v) for k, v in resources(tpl, "AWS::EKS::Addon").items()}


def test_the_six_addons(any_env: Synthesized) -> None:
    """Plus amazon-cloudwatch-observability, which stacks/observability.py owns."""
    assert set(addons_by_name(any_env)) - {"amazon-cloudwatch-observability"} == {
        "vpc-cni",
        "kube-proxy",
        "coredns",
        "eks-pod-identity-agent",
        "aws-fsx-csi-driver",
        "eks-node-monitoring-agent",
    }


def test_every_addon_is_pinned_to_the_config(any_env: Synthesized) -> None:
    """All six add-ons (the Pod Identity agent that aws_eks_v2 creates and the CloudWatch one included)."""
    found = {name: addon["Properties"].get("AddonVersion") for name, (_, addon) in addons_by_name(any_env).items()}
    assert found == any_env.cfg.cluster.addon_versions
    assert found["kube-proxy"] == "v1.36.0-eksbuild.21"
    assert found["eks-node-monitoring-agent"] == "v1.7.0-eksbuild.1"


def test_node_monitoring_agent_for_the_fencing_rule(any_env: Synthesized) -> None:
    """The add-on the fencing agent's GPU rule depends on (AcceleratedHardwareReady); its DCGM host engine tolerates
    the GPU nodes' taint (nvidia.com/gpu=true:NoSchedule by default), after the system nodes."""
    assert node_fencing.ADDON == NODE_MONITORING_AGENT
    tpl = any_env.template_json(any_env.platform.cluster)
    addons = addons_by_name(any_env)
    _, agent = addons[NODE_MONITORING_AGENT]
    values = json.loads(agent["Properties"]["ConfigurationValues"])
    assert values == {
        "dcgmAgent": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    }
    ((ng_id, _),) = resources(tpl, "AWS::EKS::Nodegroup").items()
    assert ng_id in agent["DependsOn"]


def test_fsx_csi_driver_gets_pod_identity_role(default_env: Synthesized) -> None:
    _, fsx = addons_by_name(default_env)["aws-fsx-csi-driver"]
    (assoc,) = fsx["Properties"]["PodIdentityAssociations"]
    assert assoc["ServiceAccount"] == FSX_CSI_SERVICE_ACCOUNT
    role_id = assoc["RoleArn"]["Fn::GetAtt"][0]
    role = default_env.template_json(default_env.platform.cluster)["Resources"][role_id]["Properties"]
    statement = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    agent_id, _ = addons_by_name(default_env)["eks-pod-identity-agent"]
    assert agent_id in fsx["DependsOn"]


def test_cni_before_nodes_and_coredns_after(default_env: Synthesized) -> None:
    tpl = default_env.template_json(default_env.platform.cluster)
    addons = addons_by_name(default_env)
    ((ng_id, ng),) = resources(tpl, "AWS::EKS::Nodegroup").items()
    for name in ("vpc-cni", "kube-proxy"):
        assert addons[name][0] in ng["DependsOn"]
    assert ng_id in addons["coredns"][1]["DependsOn"]
    # the GPU group lives in its own stack, deployed after the whole cluster stack (add-ons included)
    assert default_env.platform.cluster in default_env.platform.gpu.dependencies


def test_addon_conflicts_overwrite(default_env: Synthesized) -> None:
    for name in ("vpc-cni", "kube-proxy", "coredns", "aws-fsx-csi-driver"):
        assert addons_by_name(default_env)[name][1]["Properties"]["ResolveConflicts"] == "OVERWRITE"
