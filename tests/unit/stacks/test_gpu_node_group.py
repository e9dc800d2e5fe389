"""The self-managed GPU node group: interfaces, placement, IMDSv2, root volume, capacity, access entry."""

from __future__ import annotations

import pytest

from platform_config import INSTANCE_TYPES, config_from_dict, load_config
from stacks.gpu_ami import gpu_ami_parameter_name
from stacks.gpu_node_group import IMDS_HOP_LIMIT, capacity_options, network_interfaces
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import only, resources


def lt_data(env: Synthesized) -> dict:
    return only(env.template_json(env.platform.gpu), "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]


def test_p5_has_32_interfaces_with_exact_types_and_indices(default_env: Synthesized) -> None:
    nics = lt_data(default_env)["NetworkInterfaces"]
    assert len(nics) == 32
    assert [(n["NetworkCardIndex"], n["DeviceIndex"], n["InterfaceType"]) for n in nics] == [(0, 0, "efa")] + [
        (i, 0, "efa-only") for i in range(1, 32)
    ]
    for n in nics:
        assert n["DeleteOnTermination"] is True
        assert len(n["Groups"]) == 2  # cluster security group + EFA security group
    assert nics[0]["AssociatePublicIpAddress"] is False  # the primary interface says it explicitly
    assert all("AssociatePublicIpAddress" not in n for n in nics[1:])


@pytest.mark.parametrize(("name", "cards"), [(n, t.efa_cards) for n, t in INSTANCE_TYPES.items()])
def test_interfaces_follow_the_instance_table(name: str, cards: int) -> None:
    nics = network_interfaces(config_from_dict({"gpu_nodes": {"instance_type": name}}), ["sg-1"])
    assert [n["NetworkCardIndex"] for n in nics] == list(range(cards))
    assert [n["InterfaceType"] for n in nics] == ["efa"] + ["efa-only"] * (cards - 1)


def test_launch_template_has_no_top_level_security_groups(default_env: Synthesized) -> None:
    data = lt_data(default_env)
    assert "SecurityGroupIds" not in data and "SecurityGroups" not in data  # EC2 rejects them with NetworkInterfaces


def test_imdsv2_required_and_out_of_reach_of_pods(any_env: Synthesized) -> None:
    md = lt_data(any_env)["MetadataOptions"]
    assert md == {"HttpEndpoint": "enabled", "HttpTokens": "required", "HttpPutResponseHopLimit": 1}
    assert IMDS_HOP_LIMIT == 1


def test_on_demand_gets_a_cluster_placement_group(default_env: Synthesized) -> None:
    tpl = default_env.template_json(default_env.platform.gpu)
    pgs = [v for v in tpl["Resources"].values() if v["Type"] == "AWS::EC2::PlacementGroup"]
    assert [p["Properties"]["Strategy"] for p in pgs] == ["cluster"]
    pg_id = next(k for k, v in tpl["Resources"].items() if v["Type"] == "AWS::EC2::PlacementGroup")
    assert lt_data(default_env)["Placement"] == {"GroupName": {"Fn::GetAtt": [pg_id, "GroupName"]}}


def test_encrypted_gp3_root_volume(default_env: Synthesized) -> None:
    (bdm,) = lt_data(default_env)["BlockDeviceMappings"]
    assert bdm["DeviceName"] == "/dev/xvda"
    assert bdm["Ebs"] == {
        "VolumeSize": default_env.cfg.gpu_nodes.root_volume_gib,
        "VolumeType": "gp3",
        "Encrypted": True,
        "DeleteOnTermination": True,
    }


def test_capacity_block_has_no_placement_group(prod_env: Synthesized) -> None:
    tpl = prod_env.template_json(prod_env.platform.gpu)
    assert not resources(tpl, "AWS::EC2::PlacementGroup")
    assert "Placement" not in lt_data(prod_env)


def test_ami_from_ssm_at_deploy_time(any_env: Synthesized) -> None:
    tpl = any_env.template_json(any_env.platform.gpu)
    image = lt_data(any_env)["ImageId"]
    param = tpl["Parameters"][image["Ref"]]
    assert param["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    assert param["Default"] == gpu_ami_parameter_name(any_env.cfg)
    assert "/1.36/amazon-linux-2023/x86_64/nvidia/" in param["Default"]


def test_ami_is_pinned_to_the_configured_release_in_deploy_environments(prod_env: Synthesized) -> None:
    image = lt_data(prod_env)["ImageId"]
    param = prod_env.template_json(prod_env.platform.gpu)["Parameters"][image["Ref"]]
    assert param["Default"] == (
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/nvidia/"
        "amazon-eks-node-al2023-x86_64-nvidia-1.36-v20261115/image_id"
    )


def test_demo_without_a_release_follows_recommended() -> None:
    assert gpu_ami_parameter_name(load_config()).endswith("/x86_64/nvidia/recommended/image_id")


def test_deploy_without_a_release_is_refused() -> None:
    from platform_config import ConfigError

    prod = load_config(env="prod").model_dump(mode="json")
    prod["gpu_nodes"]["ami_release"] = None
    with pytest.raises(ConfigError, match=r"gpu_nodes\.ami_release is required with environment_kind 'deploy'"):
        config_from_dict(prod)
    prod["gpu_nodes"]["ami_release"] = "20261115"
    with pytest.raises(ConfigError, match="ami_release"):
        config_from_dict(prod)


def test_asg_sizes_subnet_and_tags(any_env: Synthesized) -> None:
    tpl = any_env.template_json(any_env.platform.gpu)
    asg = only(tpl, "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    nodes = any_env.cfg.gpu_nodes
    assert (asg["MinSize"], asg["MaxSize"]) == (str(nodes.min_nodes), str(nodes.max_nodes))
    assert len(asg["VPCZoneIdentifier"]) == 1
    owned = {"Key": f"kubernetes.io/cluster/{any_env.cfg.cluster.name}", "Value": "owned", "PropagateAtLaunch": True}
    assert owned in asg["Tags"]
    managed = {"Key": "aws-node-termination-handler/managed", "Value": "true", "PropagateAtLaunch": True}
    assert managed in asg["Tags"]


def test_on_demand_desired_is_node_count(default_env: Synthesized) -> None:
    asg = only(default_env.template_json(default_env.platform.gpu), "AWS::AutoScaling::AutoScalingGroup")
    assert asg["Properties"]["DesiredCapacity"] == "2"


def test_capacity_block_starts_at_zero_before_the_block(prod_env: Synthesized) -> None:
    asg = only(prod_env.template_json(prod_env.platform.gpu), "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    assert "DesiredCapacity" not in asg and asg["MinSize"] == "0"  # a new group starts at MinSize = 0


def test_update_policy_one_node_at_a_time_and_keeps_scheduled_sizes(any_env: Synthesized) -> None:
    asg = only(any_env.template_json(any_env.platform.gpu), "AWS::AutoScaling::AutoScalingGroup")
    assert asg["UpdatePolicy"] == {
        "AutoScalingRollingUpdate": {
            "MaxBatchSize": 1,
            "MinInstancesInService": 0,
            "PauseTime": "PT10M",
            "SuspendProcesses": [
                "HealthCheck",
                "ReplaceUnhealthy",
                "AZRebalance",
                "AlarmNotification",
                "ScheduledActions",
            ],
            "WaitOnResourceSignals": False,
        },
        "AutoScalingScheduledAction": {"IgnoreUnmodifiedGroupSizeProperties": True},
    }


def test_on_demand_has_no_reservation(default_env: Synthesized) -> None:
    data = lt_data(default_env)
    assert "InstanceMarketOptions" not in data and "CapacityReservationSpecification" not in data


def test_capacity_block_in_prod(prod_env: Synthesized) -> None:
    data = lt_data(prod_env)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": prod_env.cfg.gpu_nodes.capacity.reservation_id}
    }


def test_capacity_reservation_without_market_type() -> None:
    cfg = config_from_dict(
        {"gpu_nodes": {"capacity": {"type": "capacity-reservation", "reservation_id": "cr-0123456789abcdef0"}}}
    )
    assert capacity_options(cfg) == {
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
        }
    }


def test_node_role_and_ec2_linux_access_entry(default_env: Synthesized) -> None:
    t = default_env.template(default_env.platform.gpu)
    role_id = default_env.platform.gpu.get_logical_id(default_env.platform.gpu.gpu_nodes.role.node.default_child)
    role = default_env.template_json(default_env.platform.gpu)["Resources"][role_id]["Properties"]
    policies = " ".join(str(p) for p in role["ManagedPolicyArns"])
    for name in (
        "AmazonEKSWorkerNodePolicy",
        "AmazonEKS_CNI_Policy",
        "AmazonEC2ContainerRegistryReadOnly",
        "AmazonSSMManagedInstanceCore",
    ):
        assert name in policies
    t.has_resource_properties(
        "AWS::EKS::AccessEntry", {"Type": "EC2_LINUX", "PrincipalArn": {"Fn::GetAtt": [role_id, "Arn"]}}
    )
    entry = next(
        v
        for v in default_env.template_json(default_env.platform.gpu)["Resources"].values()
        if v["Type"] == "AWS::EKS::AccessEntry" and v["Properties"].get("Type") == "EC2_LINUX"
    )
    assert "AccessPolicies" not in entry["Properties"] or entry["Properties"]["AccessPolicies"] == []
