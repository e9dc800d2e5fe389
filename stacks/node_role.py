"""The IAM role of EKS worker nodes (shared by the system and the GPU node groups)."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.compliance import acknowledge, managed_policy_finding

#: The AWS-managed policies of an EKS node role (EKS user guide, "Amazon EKS node IAM role"), plus SSM for
#: Session Manager access instead of SSH.
NODE_ROLE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)
NODE_ROLE_POLICY_REASON = (
    "The EKS node IAM role is documented with these AWS-managed policies; AWS updates them as EKS, "
    "the VPC CNI, ECR and SSM change, which a copied inline policy would miss."
)


def eks_node_role(scope: Construct, construct_id: str, description: str) -> iam.Role:
    """An EC2-assumed role with :data:`NODE_ROLE_POLICIES`; their cdk-nag IAM4 findings acknowledged with the reason."""
    role = iam.Role(
        scope,
        construct_id,
        assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
        description=description,
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(n) for n in NODE_ROLE_POLICIES],
    )
    for policy in NODE_ROLE_POLICIES:
        acknowledge(role, managed_policy_finding(policy), NODE_ROLE_POLICY_REASON)
    return role
