"""The EFA security group: all protocols from itself and to itself, as EFA's OS-bypass traffic needs."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


@dataclass(frozen=True)
class EfaSecurityGroupProps:
    """Inputs of :class:`EfaSecurityGroup`.

    Attributes:
        vpc: the VPC of the GPU nodes.
        cluster_name: used in the description only.
    """

    vpc: ec2.IVpc
    cluster_name: str


class EfaSecurityGroup(Construct):
    """A security group attached, next to the cluster security group, to every GPU node interface.

    Ingress and egress are both limited to the group itself (every protocol): EFA traffic between
    nodes, and nothing else. Self-managed nodes do not inherit the cluster security group's
    self-egress, so the explicit egress rule matters. General egress (image pulls, the API server)
    comes from the cluster security group.

    Attributes:
        security_group: the EFA security group.
    """

    def __init__(self, scope: Construct, construct_id: str, props: EfaSecurityGroupProps) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=props.vpc,
            description=f"EFA traffic between GPU nodes of {props.cluster_name}",
            allow_all_outbound=False,
        )
        self.security_group.add_ingress_rule(self.security_group, ec2.Port.all_traffic(), "EFA from itself")
        self.security_group.add_egress_rule(self.security_group, ec2.Port.all_traffic(), "EFA to itself")
