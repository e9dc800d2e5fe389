"""The VPC: a new one (private subnets behind NAT) or an existing one imported by id, without lookups."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Annotations
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from platform_config import ProjectConfig

#: Prefix length of each new private subnet (/19 = 8187 addresses: room for pod IPs from VPC CNI).
PRIVATE_SUBNET_MASK = 19
#: Prefix length of each new public subnet (NAT gateways only).
PUBLIC_SUBNET_MASK = 24


@dataclass(frozen=True)
class NetworkProps:
    """Network inputs, all from ``cfg.network`` / ``cfg.aws``.

    Attributes:
        cfg: the project configuration.
    """

    cfg: ProjectConfig


def secondary_availability_zone(az: str) -> str:
    """A second AZ of the same region (EKS needs control-plane subnets in two AZs): ``a`` pairs with ``b``."""
    return az[:-1] + ("b" if az[-1] == "a" else "a")


class Network(Construct):
    """VPC, the private subnets for the cluster and the single GPU subnet.

    New VPC: two AZs (``aws.availability_zone`` first, then a second one for the control plane),
    a public and a private subnet in each, ``network.nat_gateways`` NAT gateways, VPC flow logs.
    Existing VPC: ``network.vpc_id`` with ``network.private_subnets`` (id -> AZ) and
    ``network.gpu_subnet_id``; nothing is looked up at synth time.

    Attributes:
        vpc: the VPC.
        private_subnets: subnets for the control plane ENIs and the system nodes.
        gpu_subnet: the one subnet (in ``aws.availability_zone``) of GPU nodes and FSx.
    """

    def __init__(self, scope: Construct, construct_id: str, props: NetworkProps) -> None:
        super().__init__(scope, construct_id)
        net, aws = props.cfg.network, props.cfg.aws
        if net.vpc_id is None:
            self.vpc: ec2.IVpc = ec2.Vpc(
                self,
                "Vpc",
                ip_addresses=ec2.IpAddresses.cidr(net.vpc_cidr),
                availability_zones=[aws.availability_zone, secondary_availability_zone(aws.availability_zone)],
                nat_gateways=net.nat_gateways,
                subnet_configuration=[
                    ec2.SubnetConfiguration(
                        name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=PUBLIC_SUBNET_MASK
                    ),
                    ec2.SubnetConfiguration(
                        name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=PRIVATE_SUBNET_MASK
                    ),
                ],
                flow_logs={"all": ec2.FlowLogOptions(traffic_type=ec2.FlowLogTrafficType.ALL)},
            )
            self.private_subnets: list[ec2.ISubnet] = list(self.vpc.private_subnets)
            self.gpu_subnet: ec2.ISubnet = next(
                s for s in self.private_subnets if s.availability_zone == aws.availability_zone
            )
        else:
            azs = sorted(set(net.private_subnets.values()))
            self.vpc = ec2.Vpc.from_vpc_attributes(self, "Vpc", vpc_id=net.vpc_id, availability_zones=azs)
            self.private_subnets = [
                ec2.Subnet.from_subnet_attributes(
                    self,
                    f"Subnet-{subnet_id}",
                    subnet_id=subnet_id,
                    availability_zone=az,
                    route_table_id=net.route_tables.get(subnet_id),
                )
                for subnet_id, az in sorted(net.private_subnets.items())
            ]
            for subnet in self.private_subnets:
                if subnet.subnet_id not in net.route_tables:
                    Annotations.of(subnet).acknowledge_warning(
                        "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                        "Nothing in this app reads the route table of an imported subnet "
                        "(network.route_tables is optional).",
                    )
            self.gpu_subnet = next(s for s in self.private_subnets if s.subnet_id == net.gpu_subnet_id)
