"""Automatic fencing of GPU nodes that cannot recover alone, so a lost pod's replacement lands on another node.

Two well-kept components and one small agent:

* the **EKS node monitoring agent** (add-on ``eks-node-monitoring-agent``, github.com/aws/eks-node-monitoring-agent): it
  reads the kernel log for NVIDIA XIDs and runs DCGM diagnostics, and sets the node condition
  ``AcceleratedHardwareReady=False`` on a GPU fault. It is AWS's, runs on any EKS node (self-managed ones included),
  and is what EKS node auto repair reads; auto repair itself covers managed node groups and Karpenter only, not this
  self-managed group. node-problem-detector would need custom GPU plugins, DCGM exporter only exports metrics, and
  NVIDIA NVSentinel quarantines and reboots nodes without knowing about the Job: none of them fences an Auto Scaling
  instance. Installed with the other managed add-ons (:mod:`stacks.addons`), pinned like them
  (``cluster.addon_versions``, default in ``platform_config.versions``), its DCGM DaemonSet tolerating the GPU taint;
* the **fencing agent** (:mod:`stacks.fencing.handler`, a Python Lambda function in the cluster's private subnets,
  invoked every minute, polling every 5 s): a NotReady node whose instance is alive, or a node with a GPU fault, is
  cordoned and marked ``Unhealthy`` in its Auto Scaling group (replaced); a fenced node's termination hook is
  completed (an unreachable node cannot be drained); a NotReady node whose instance is gone gets the
  ``out-of-service`` taint (PodGC deletes its pods at its next pass). Its role may only set instance health and
  complete lifecycle actions on this group; its access entry maps it to a Kubernetes group whose ClusterRole reads
  and patches nodes, nothing else;
* **aws-node-termination-handler** (:mod:`stacks.node_termination_handler`) drains a GPU-faulted node through the
  Eviction API, which the Job's PodDisruptionBudget admits for one pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from platform_config import ProjectConfig
from stacks.compliance import acknowledge
from stacks.node_termination_handler import acknowledge_group_arn, group_arn

#: The managed add-on that sets ``AcceleratedHardwareReady`` (installed by :mod:`stacks.addons`).
ADDON = "eks-node-monitoring-agent"
#: The Kubernetes group of the agent's access entry, and its ClusterRole.
GROUP = "fsdp-node-fencing"
CODE = Path(__file__).parent / "fencing"


def node_selector(cfg: ProjectConfig) -> str:
    """The GPU nodes' labels as a Kubernetes label selector (``k=v,k=v``)."""
    return ",".join(f"{k}={v}" for k, v in sorted(cfg.gpu_nodes.node_labels.items()))


def cluster_role(cfg: ProjectConfig) -> list[dict]:
    """The ClusterRole (nodes: get, list, patch) and its binding to :data:`GROUP`."""
    meta = {"name": GROUP, "labels": {"app.kubernetes.io/part-of": cfg.job.job_name}}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": meta,
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": GROUP},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": GROUP}],
    }
    return [role, binding]


@dataclass(frozen=True)
class NodeFencingProps:
    """Inputs of :class:`NodeFencing`.

    Attributes:
        cfg: the project configuration (``gpu_nodes.node_labels``, ``job.job_name``).
        cluster: the EKS cluster (add-on, access entry, RBAC manifest, API endpoint).
        vpc: the cluster's VPC (the function reaches a private API endpoint from it).
        subnets: the cluster's private subnets (the function's network interfaces).
        auto_scaling_group: the GPU group.
        lifecycle_hook: its termination hook (from the node termination handler).
    """

    cfg: ProjectConfig
    cluster: eks.Cluster
    vpc: ec2.IVpc
    subnets: tuple[ec2.ISubnet, ...]
    auto_scaling_group: autoscaling.CfnAutoScalingGroup
    lifecycle_hook: autoscaling.CfnLifecycleHook


class NodeFencing(Construct):
    """The fencing agent, its schedule and its permissions (module docstring)."""

    def __init__(self, scope: Construct, construct_id: str, props: NodeFencingProps) -> None:
        super().__init__(scope, construct_id)
        cfg, cluster, group = props.cfg, props.cluster, props.auto_scaling_group
        self.function = lambda_.Function(
            self,
            "Agent",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(CODE), exclude=["__pycache__", "__init__.py"]),
            timeout=Duration.seconds(60),
            memory_size=256,
            vpc=props.vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=list(props.subnets)),
            security_groups=[cluster.cluster_security_group],
            reserved_concurrent_executions=1,  # one agent at a time: no two fence the same node
            environment={
                "CLUSTER_NAME": cluster.cluster_name,
                "CLUSTER_ENDPOINT": cluster.cluster_endpoint,
                "CLUSTER_CA": cluster.cluster_certificate_authority_data,
                "GROUP_NAME": group.ref,
                "LIFECYCLE_HOOK": props.lifecycle_hook.ref,
                "NODE_SELECTOR": node_selector(cfg),
            },
            description="Fences GPU nodes: NotReady with a live instance, or a GPU fault (docs/kubernetes.md)",
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["autoscaling:SetInstanceHealth", "autoscaling:CompleteLifecycleAction"],
                resources=[group_arn(group)],
            )
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["autoscaling:DescribeAutoScalingGroups", "ec2:DescribeInstances"], resources=["*"]
            )
        )
        role = self.function.role
        assert role is not None
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "autoscaling:DescribeAutoScalingGroups and ec2:DescribeInstances support no resource-level permissions; "
            "the actions that change anything are scoped to the GPU group.",
        )
        for managed in ("AWSLambdaBasicExecutionRole", "AWSLambdaVPCAccessExecutionRole"):
            acknowledge(
                role,
                f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{managed}]",
                "The AWS managed policies of a function in a VPC: its logs and its network interfaces.",
            )
        acknowledge_group_arn(role, group)
        self.access_entry = eks.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=cluster.cluster_name,
            principal_arn=role.role_arn,
            kubernetes_groups=[GROUP],
            type="STANDARD",
        )
        self.rbac = cluster.add_manifest("NodeFencingRbac", *cluster_role(cfg))
        self.schedule = events.Rule(
            self,
            "EveryMinute",
            schedule=events.Schedule.rate(Duration.minutes(1)),
            targets=[targets.LambdaFunction(self.function)],
        )
