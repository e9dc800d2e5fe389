"""FSx for Lustre SCRATCH_2 next to the GPU nodes, Lustre ports, and the static PV/PVC built from its attributes."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from platform_config import ConfigError, config_from_dict, load_config
from stacks.fsx_storage import persistent_volume, persistent_volume_claim, training_namespace, training_service_account
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import only, resources


def fs_props(env: Synthesized) -> dict:
    return only(env.template_json(env.platform.storage), "AWS::FSx::FileSystem")["Properties"]


def test_scratch2_lustre_215_capacity(any_env: Synthesized) -> None:
    p = fs_props(any_env)
    assert p["FileSystemType"] == "LUSTRE"
    assert p["FileSystemTypeVersion"] == "2.15"
    assert p["LustreConfiguration"]["DeploymentType"] == "SCRATCH_2"
    assert p["StorageCapacity"] == any_env.cfg.storage.fsx_capacity_gib


def test_default_capacity_is_1200() -> None:
    assert load_config(env="default").storage.fsx_capacity_gib == 1200


@pytest.mark.parametrize("bad", [1000, 1800, 3600])
def test_invalid_capacity_names_the_field(bad: int) -> None:
    with pytest.raises(ConfigError, match=r"storage\.fsx_capacity_gib"):
        config_from_dict({"storage": {"fsx_capacity_gib": bad}})


def test_same_subnet_as_gpu_nodes(any_env: Synthesized) -> None:
    """The file system's subnet is the one subnet of the GPU Auto Scaling group (same AZ, no cross-AZ traffic)."""
    asg = only(any_env.template_json(any_env.platform.gpu), "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    (asg_subnet,) = asg["VPCZoneIdentifier"]
    (fs_subnet,) = fs_props(any_env)["SubnetIds"]
    if isinstance(asg_subnet, str):  # imported subnet: literal id on both sides
        assert fs_subnet == asg_subnet == any_env.cfg.network.gpu_subnet_id
    else:  # created subnet: both stacks read the very same subnet from the cluster stack's outputs
        assert json.dumps(asg_subnet) == json.dumps(fs_subnet)


def lustre_rules(env: Synthesized) -> tuple[list[dict], str]:
    tpl = env.template_json(env.platform.storage)
    rules = [r["Properties"] for r in resources(tpl, "AWS::EC2::SecurityGroupIngress").values()]
    fsx_sg = {"Fn::GetAtt": [next(k for k in resources(tpl, "AWS::EC2::SecurityGroup")), "GroupId"]}
    return rules, json.dumps(fsx_sg)


def test_lustre_rules_both_ways_with_the_cluster_security_group(any_env: Synthesized) -> None:
    """TCP 988 and 1018-1023 from the clients to the file system and from the file system back to the clients."""
    rules, fsx_sg = lustre_rules(any_env)
    client = "ClusterSecurityGroupId"  # on the system nodes (EKS attaches it) and every GPU interface
    to_servers = {
        (r["FromPort"], r["ToPort"])
        for r in rules
        if json.dumps(r["GroupId"]) == fsx_sg and client in json.dumps(r["SourceSecurityGroupId"])
    }
    to_clients = {
        (r["FromPort"], r["ToPort"])
        for r in rules
        if client in json.dumps(r["GroupId"]) and json.dumps(r["SourceSecurityGroupId"]) == fsx_sg
    }
    assert to_servers == to_clients == {(988, 988), (1018, 1023)}
    assert all(r["IpProtocol"] == "tcp" for r in rules)


def test_every_node_group_that_mounts_fsx_carries_the_client_group(any_env: Synthesized) -> None:
    lt = only(any_env.template_json(any_env.platform.gpu), "AWS::EC2::LaunchTemplate")["Properties"]
    for nic in lt["LaunchTemplateData"]["NetworkInterfaces"]:
        assert any("ClusterSecurityGroupId" in json.dumps(g) for g in nic["Groups"])
    tpl = any_env.template_json(any_env.platform.cluster)
    ng = only(tpl, "AWS::EKS::Nodegroup")["Properties"]
    lt_id = ng["LaunchTemplate"]["Id"]["Ref"]
    data = tpl["Resources"][lt_id]["Properties"]["LaunchTemplateData"]
    # no security group and no interfaces in the launch template: EKS attaches the cluster security group itself
    assert not {"SecurityGroupIds", "SecurityGroups", "NetworkInterfaces"} & data.keys()


def test_namespace_pod_security_and_service_account_without_token() -> None:
    cfg = load_config()
    labels = training_namespace(cfg)["metadata"]["labels"]
    assert labels == {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "v1.36",
        "pod-security.kubernetes.io/warn": "baseline",
        "pod-security.kubernetes.io/warn-version": "v1.36",
        "pod-security.kubernetes.io/audit": "baseline",
        "pod-security.kubernetes.io/audit-version": "v1.36",
    }
    assert training_service_account(cfg)["automountServiceAccountToken"] is False


def test_pv_and_pvc_from_file_system_attributes(default_env: Synthesized) -> None:
    """volumeHandle, dnsname and mountname are CloudFormation references to the file system (resolved at deploy)."""
    tpl = default_env.template_json(default_env.platform.storage)
    fs_id = next(iter(resources(tpl, "AWS::FSx::FileSystem")))
    joined = [
        r["Properties"]["Manifest"]["Fn::Join"][1]
        for r in resources(tpl, "Custom::AWSCDK-EKS-KubernetesResource").values()
        if isinstance(r["Properties"]["Manifest"], dict)
    ]
    (parts,) = joined
    after = {parts[k].rsplit(",", 1)[-1]: parts[k + 1] for k in range(len(parts) - 1) if isinstance(parts[k], str)}
    assert after['"volumeHandle":"'] == {"Ref": fs_id}
    assert after['"volumeAttributes":{"dnsname":"'] == {"Ref": fs_id}  # aws_fsx: <fs-id>.fsx.<region>.<suffix>
    assert after['"mountname":"'] == {"Fn::GetAtt": [fs_id, "LustreMountName"]}
    text = json.dumps(tpl)
    cfg = default_env.cfg
    for name in (cfg.storage.pv_name, cfg.storage.pvc_name, cfg.job.namespace, cfg.job.service_account):
        assert name in text


def test_pv_spec() -> None:
    cfg = load_config()
    pv = persistent_volume(cfg, "fs-0123", "fs-0123.fsx.us-east-1.amazonaws.com", "abcd")
    spec = pv["spec"]
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["storageClassName"] == ""
    assert spec["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0123",
        "volumeAttributes": {"dnsname": "fs-0123.fsx.us-east-1.amazonaws.com", "mountname": "abcd"},
    }
    pvc = persistent_volume_claim(cfg)
    assert pvc["spec"]["volumeName"] == cfg.storage.pv_name and pvc["spec"]["storageClassName"] == ""
    assert pvc["metadata"] == {"name": cfg.storage.pvc_name, "namespace": cfg.job.namespace}


def test_objects_validate_against_kubernetes_schema() -> None:
    cfg = load_config()
    version = f"{cfg.cluster.kubernetes_version}.0"
    for obj in (
        training_namespace(cfg),
        training_service_account(cfg),
        persistent_volume(cfg, "fs-0123", "fs.example", "abcd"),
        persistent_volume_claim(cfg),
    ):
        kubernetes_validate.validate(obj, version, strict=True)
