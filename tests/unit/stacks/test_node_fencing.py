"""The fencing agent in the GPU stack: its function, schedule, permissions, access entry and RBAC."""

from __future__ import annotations

import json

from stacks.node_fencing import GROUP, cluster_role, node_selector
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import resources

GROUP_REF = {"Ref": "GpuNodesAutoScalingGroup481E5AE1"}


def test_the_selector_and_the_cluster_role(default_env: Synthesized) -> None:
    cfg = default_env.cfg
    assert node_selector(cfg) == "node-group=gpu-efa,workload=training"
    role, binding = cluster_role(cfg)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": GROUP}]


def test_the_agent_runs_every_minute_with_only_the_permissions_it_needs(any_env: Synthesized) -> None:
    tpl = any_env.template_json(any_env.platform.gpu)
    (fn_id, fn) = next(
        (k, v) for k, v in resources(tpl, "AWS::Lambda::Function").items() if k.startswith("NodeFencingAgent")
    )
    props = fn["Properties"]
    assert (props["Handler"], props["Timeout"], props["ReservedConcurrentExecutions"]) == ("handler.handler", 60, 1)
    env = props["Environment"]["Variables"]
    assert env["NODE_SELECTOR"] == "node-group=gpu-efa,workload=training" and env["GROUP_NAME"] == GROUP_REF
    assert "VpcConfig" in props
    (rule,) = [
        r["Properties"] for r in resources(tpl, "AWS::Events::Rule").values() if "ScheduleExpression" in r["Properties"]
    ]
    assert rule["ScheduleExpression"] == "rate(1 minute)" and rule["Targets"][0]["Arn"]["Fn::GetAtt"][0] == fn_id
    role_id = props["Role"]["Fn::GetAtt"][0]
    (policy,) = [
        p for p in resources(tpl, "AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    by_action = {json.dumps(s["Action"]): s["Resource"] for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    scoped = json.dumps(by_action['["autoscaling:CompleteLifecycleAction", "autoscaling:SetInstanceHealth"]'])
    assert ":autoScalingGroup:*:autoScalingGroupName/" in scoped and GROUP_REF["Ref"] in scoped
    assert by_action['["autoscaling:DescribeAutoScalingGroups", "ec2:DescribeInstances"]'] == "*"
    (entry,) = [
        e["Properties"]
        for e in resources(tpl, "AWS::EKS::AccessEntry").values()
        if e["Properties"].get("KubernetesGroups") == [GROUP]
    ]
    assert entry["Type"] == "STANDARD" and entry["PrincipalArn"]["Fn::GetAtt"][0] == role_id
