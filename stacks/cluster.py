"""The EKS control plane (``aws_eks_v2``): access entries, KMS-encrypted secrets, full logging."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from platform_config import ProjectConfig
from stacks.compliance import acknowledge, managed_policy_finding


class ClusterConfigError(ValueError):
    """A cluster setting that cannot be synthesized (the message names the field)."""


@dataclass(frozen=True)
class EksClusterProps:
    """Inputs of :class:`EksCluster`.

    Attributes:
        cfg: the project configuration (``cluster.*``).
        vpc: VPC of the cluster.
        subnets: private subnets for the control-plane ENIs (two AZs at least).
    """

    cfg: ProjectConfig
    vpc: ec2.IVpc
    subnets: list[ec2.ISubnet]


def kubernetes_version(cfg: ProjectConfig) -> eks.KubernetesVersion:
    """``cluster.kubernetes_version`` as a CDK version (the config accepts only ``SUPPORTED_KUBERNETES_MINORS``)."""
    return eks.KubernetesVersion.of(cfg.cluster.kubernetes_version)


def kubectl_layer(scope: Construct, cfg: ProjectConfig) -> lambda_.ILayerVersion:
    """The kubectl Lambda layer whose minor matches ``cluster.kubernetes_version``.

    Each minor ships as its own PyPI package (``aws-cdk.lambda-layer-kubectl-vNN``); a missing one is a
    synth-time error that names the field and the package to install.
    """
    minor = cfg.cluster.minor
    module_name = f"aws_cdk.lambda_layer_kubectl_v{minor}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        raise ClusterConfigError(
            f"cluster.kubernetes_version {cfg.cluster.kubernetes_version!r} needs the kubectl layer package "
            f"aws-cdk.lambda-layer-kubectl-v{minor} (pin it in requirements.txt and pip install it)"
        ) from None
    return getattr(module, f"KubectlV{minor}Layer")(scope, "KubectlLayer")


def endpoint_access(cfg: ProjectConfig) -> eks.EndpointAccess:
    """Private only, or public restricted to ``cluster.public_access_cidrs`` (plus private access)."""
    if cfg.cluster.endpoint_access == "private":
        return eks.EndpointAccess.PRIVATE
    return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*cfg.cluster.public_access_cidrs)


class EksCluster(Construct):
    """An EKS cluster with Auto Mode off, access-entry auth only and no default capacity.

    * Kubernetes ``cluster.kubernetes_version`` with a kubectl layer of the same minor;
    * secrets envelope-encrypted with a customer-managed KMS key (rotation on);
    * all five control-plane log types on;
    * ``bootstrap_self_managed_addons`` off: vpc-cni, kube-proxy and CoreDNS come as managed
      add-ons (``stacks/addons.py``) so their versions are visible and upgradable;
    * ``cluster.admin_principal_arn`` (when set) gets ``AmazonEKSClusterAdminPolicy`` through an access entry.

    Attributes:
        cluster: the ``aws_eks_v2.Cluster``.
        secrets_key: the KMS key of Kubernetes secrets.
    """

    def __init__(self, scope: Construct, construct_id: str, props: EksClusterProps) -> None:
        super().__init__(scope, construct_id)
        cfg = props.cfg
        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"EKS secrets encryption for {cfg.cluster.name}",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        private = cfg.cluster.endpoint_access == "private"
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=cfg.cluster.name,
            version=kubernetes_version(cfg),
            vpc=props.vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=props.subnets)],
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            bootstrap_self_managed_addons=False,
            service_ipv4_cidr=cfg.cluster.service_ipv4_cidr,
            bootstrap_cluster_creator_admin_permissions=False,
            endpoint_access=endpoint_access(cfg),
            secrets_encryption_key=self.secrets_key,
            cluster_logging=[
                eks.ClusterLoggingTypes.API,
                eks.ClusterLoggingTypes.AUDIT,
                eks.ClusterLoggingTypes.AUTHENTICATOR,
                eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
                eks.ClusterLoggingTypes.SCHEDULER,
            ],
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=kubectl_layer(self, cfg),
                private_subnets=props.subnets if private else None,
            ),
        )
        self._acknowledge_generated_resources()
        if cfg.cluster.admin_principal_arn:
            self.cluster.grant_access(
                "Admin",
                cfg.cluster.admin_principal_arn,
                [
                    eks.AccessPolicy.from_access_policy_name(
                        "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )

    def _acknowledge_generated_resources(self) -> None:
        """Findings on resources that ``aws_eks_v2.Cluster`` creates and does not let us configure."""
        role = self.cluster.node.find_child("Role")
        acknowledge(
            role,
            managed_policy_finding("AmazonEKSClusterPolicy"),
            "The EKS cluster service role requires the AWS-managed AmazonEKSClusterPolicy (EKS user guide).",
        )
        provider = self.cluster.node.find_child("KubectlProvider")
        reason = (
            "Created by aws_eks_v2's kubectl provider (runs kubectl/helm for this cluster's manifests and "
            "charts); its role, policies and runtime are fixed by aws-cdk-lib, which keeps them current."
        )
        handler = provider.node.find_child("Handler")
        handler_id = Stack.of(self).get_logical_id(handler.node.default_child)  # type: ignore[arg-type]
        ecr_public_condition = Stack.of(self).get_logical_id(handler.node.find_child("HasEcrPublic"))  # type: ignore[arg-type]
        ecr_public = json.dumps(
            {
                "Fn::If": [
                    ecr_public_condition,
                    {
                        "Fn::Join": [
                            "",
                            [
                                "arn:",
                                {"Ref": "AWS::Partition"},
                                ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly",
                            ],
                        ]
                    },
                    {"Ref": "AWS::NoValue"},
                ]
            },
            separators=(",", ":"),
        )
        findings = [
            managed_policy_finding("service-role/AWSLambdaBasicExecutionRole"),
            managed_policy_finding("service-role/AWSLambdaVPCAccessExecutionRole"),
            managed_policy_finding("AmazonEC2ContainerRegistryReadOnly"),
            f"AwsSolutions-IAM4[Policy::{ecr_public}]",
            f"AwsSolutions-IAM5[Resource::<{handler_id}.Arn>:*]",
            "AwsSolutions-L1",
        ]
        for finding in findings:
            acknowledge(provider, finding, reason)
