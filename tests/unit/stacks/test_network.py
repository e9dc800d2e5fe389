"""Network: a new two-AZ VPC, or an existing VPC imported by id (no lookups)."""

from __future__ import annotations

from stacks.network import secondary_availability_zone
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import only, resources


def test_new_vpc_two_azs_private_subnets_nat_flow_logs(default_env: Synthesized) -> None:
    tpl = default_env.template_json(default_env.platform.cluster)
    vpc = only(tpl, "AWS::EC2::VPC")["Properties"]
    assert vpc["CidrBlock"] == default_env.cfg.network.vpc_cidr
    subnets = [s["Properties"] for s in resources(tpl, "AWS::EC2::Subnet").values()]
    az = default_env.cfg.aws.availability_zone
    assert sorted(s["AvailabilityZone"] for s in subnets) == sorted(
        [az, az, secondary_availability_zone(az)] * 1 + [secondary_availability_zone(az)]
    )
    assert len(resources(tpl, "AWS::EC2::NatGateway")) == default_env.cfg.network.nat_gateways
    assert len(resources(tpl, "AWS::EC2::FlowLog")) == 1


def test_gpu_subnet_is_the_private_subnet_in_the_capacity_az(default_env: Synthesized) -> None:
    net = default_env.platform.cluster.network
    assert net.gpu_subnet in net.private_subnets
    assert net.gpu_subnet.availability_zone == default_env.cfg.aws.availability_zone


def test_secondary_az() -> None:
    assert secondary_availability_zone("us-east-1a") == "us-east-1b"
    assert secondary_availability_zone("us-west-2c") == "us-west-2a"


def test_existing_vpc_is_imported_not_created(prod_env: Synthesized) -> None:
    tpl = prod_env.template_json(prod_env.platform.cluster)
    assert not resources(tpl, "AWS::EC2::VPC") and not resources(tpl, "AWS::EC2::Subnet")
    net = prod_env.platform.cluster.network
    assert net.vpc.vpc_id == prod_env.cfg.network.vpc_id
    assert net.gpu_subnet.subnet_id == prod_env.cfg.network.gpu_subnet_id
    cluster = only(tpl, "AWS::EKS::Cluster")["Properties"]
    assert sorted(cluster["ResourcesVpcConfig"]["SubnetIds"]) == sorted(prod_env.cfg.network.private_subnets)
