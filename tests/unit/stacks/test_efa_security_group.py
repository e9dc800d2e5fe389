"""The EFA security group: every protocol from and to itself, nothing else."""

from __future__ import annotations

from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import resources


def test_self_ingress_and_egress_all_protocols(default_env: Synthesized) -> None:
    stack = default_env.platform.gpu
    sg_id = stack.get_logical_id(stack.efa.security_group.node.default_child)
    tpl = default_env.template_json(stack)
    sg = tpl["Resources"][sg_id]["Properties"]
    assert sg.get("SecurityGroupEgress", []) == [] or all(
        e.get("CidrIp") != "0.0.0.0/0" for e in sg.get("SecurityGroupEgress", [])
    )
    ingress = [
        r["Properties"]
        for r in resources(tpl, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg_id, "GroupId"]}
        and r["Properties"].get("SourceSecurityGroupId") == {"Fn::GetAtt": [sg_id, "GroupId"]}
    ]
    egress = [
        r["Properties"]
        for r in resources(tpl, "AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg_id, "GroupId"]}
    ]
    assert [i["IpProtocol"] for i in ingress] == ["-1"]
    assert [(e["IpProtocol"], e["DestinationSecurityGroupId"]) for e in egress] == [
        ("-1", {"Fn::GetAtt": [sg_id, "GroupId"]})
    ]


def test_gpu_interfaces_carry_cluster_and_efa_groups(default_env: Synthesized) -> None:
    stack = default_env.platform.gpu
    sg_id = stack.get_logical_id(stack.efa.security_group.node.default_child)
    lt = next(iter(resources(default_env.template_json(stack), "AWS::EC2::LaunchTemplate").values()))
    groups = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"][0]["Groups"]
    assert {"Fn::GetAtt": [sg_id, "GroupId"]} in groups
    assert any("ClusterSecurityGroupId" in str(g) for g in groups)
