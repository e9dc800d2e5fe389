"""FSx for Lustre SCRATCH_2 next to the GPU nodes, Lustre ports, and the static PV/PVC built from its attributes."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from platform_config import ConfigError, config_from_dict, load_config
from stacks.fsx_storage import persistent_volume, persistent_volume_claim, training_namespace, training_service_account
from tests.unit.stacks.conftest import Synthesized, only, resources


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
    asg = only(any_env.template_json(any_env.platform.cluster), "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    (asg_subnet,) = asg["VPCZoneIdentifier"]
    (fs_subnet,) = fs_props(any_env)["SubnetIds"]
    if isinstance(asg_subnet, str):  # imported subnet: literal id on both sides
        assert fs_subnet == asg_subnet == any_env.cfg.network.gpu_subnet_id
    else:  # created subnet: the storage stack reads the very subnet the ASG references
        assert asg_subnet["Ref"] in json.dumps(fs_subnet)


def test_lustre_ports_open_from_gpu_node_security_group(default_env: Synthesized) -> None:
    tpl = default_env.template_json(default_env.platform.storage)
    rules = [r["Properties"] for r in resources(tpl, "AWS::EC2::SecurityGroupIngress").values()]
    efa_sg = default_env.platform.cluster.get_logical_id(
        default_env.platform.cluster.efa.security_group.node.default_child
    )
    from_nodes = {(r["FromPort"], r["ToPort"]) for r in rules if efa_sg in json.dumps(r.get("SourceSecurityGroupId"))}
    assert from_nodes == {(988, 1023)}  # 988 and the LNet ports 1018-1023 (aws_fsx's default range)


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
