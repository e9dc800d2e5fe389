"""Node termination handling for the self-managed GPU group: aws-node-termination-handler in queue-processor mode.

Self-managed nodes get no drain from EKS when EC2 or Auto Scaling takes an instance away (managed node groups do).
The EKS Capacity Block guide and the AWS Node Termination Handler (NTH) project recommend the queue processor for
self-managed groups, which this construct builds the way NTH's own CloudFormation template does:

* an SQS queue (SSE-SQS, TLS only, 5-minute retention) fed by EventBridge rules: this group's termination lifecycle
  action, EC2 instance state changes (stopping/shutting-down/stopped/terminated) and AWS Health scheduled changes
  for EC2 (no Spot rules: the group runs on-demand, ODCR or Capacity Block capacity);
* a termination lifecycle hook on the group, so Auto Scaling (a Capacity Block's scheduled scale-in, a rolling
  update, an operator) waits for the drain before the instance goes;
* NTH as a Deployment on the system nodes (Helm, chart version ``helm.node_termination_handler``), with an IAM role
  through a Pod Identity association: it cordons and drains the node, which gives the training pod its
  ``terminationGracePeriodSeconds`` (the checkpoint section timeout) to finish a checkpoint, then completes the
  lifecycle action. Only instances tagged :data:`MANAGED_TAG` (the GPU group propagates it) are handled.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Duration, Stack, Token
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from aws_cdk.region_info import RegionInfo
from constructs import Construct

from platform_config import ProjectConfig
from stacks.compliance import acknowledge
from stacks.helm_releases import NTH_CHART as CHART
from stacks.helm_releases import NTH_REPOSITORY as CHART_REPOSITORY

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-node-termination-handler"
#: NTH only drains instances carrying this tag (any value).
MANAGED_TAG = "aws-node-termination-handler/managed"
#: Seconds NTH allows beyond the training pod's grace period (eviction, DaemonSets, node deletion).
DRAIN_MARGIN_SECONDS = 60
#: Seconds the lifecycle hook waits beyond the drain before Auto Scaling continues on its own.
HOOK_MARGIN_SECONDS = 120
#: States of "EC2 Instance State-change Notification" that mean the node is going away.
LEAVING_STATES = ["stopping", "stopped", "shutting-down", "terminated"]


def drain_seconds(cfg: ProjectConfig) -> int:
    """How long NTH gives a node to drain: the training pod's grace period (the checkpoint section timeout,
    ``charts/training_job.py``) plus :data:`DRAIN_MARGIN_SECONDS`."""
    return int(cfg.ft.section_timeouts_s["checkpoint"]) + DRAIN_MARGIN_SECONDS


def hook_timeout_seconds(cfg: ProjectConfig) -> int:
    """Heartbeat timeout of the termination lifecycle hook (NTH completes the action earlier when it is done)."""
    return drain_seconds(cfg) + HOOK_MARGIN_SECONDS


def nag_arn_prefix(stack: Stack) -> str:
    """``arn:<partition>:autoscaling:<region>:<account>`` as cdk-nag prints it: literals where the stack's
    environment is known, ``<AWS::...>`` pseudo parameters where it is not."""
    region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
    account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
    partition = "<AWS::Partition>" if Token.is_unresolved(stack.region) else RegionInfo.get(stack.region).partition
    return f"arn:{partition}:autoscaling:{region}:{account}"


def chart_values(cfg: ProjectConfig, queue_url: str, region: str) -> dict:
    """Helm values: queue processor on the system nodes, drain with the pods' own grace periods."""
    return {
        "enableSqsTerminationDraining": True,
        "queueURL": queue_url,
        "awsRegion": region,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "checkTagBeforeDraining": True,
        "managedTag": MANAGED_TAG,
        "deleteSqsMsgIfNodeNotFound": True,  # state changes of other instances in the account are not ours
        "podTerminationGracePeriod": -1,  # each pod's own terminationGracePeriodSeconds
        "nodeTerminationGracePeriod": drain_seconds(cfg),
        "nodeSelector": dict(cfg.cluster.system_node_labels),
    }


def group_arn(group: autoscaling.CfnAutoScalingGroup) -> str:
    """The group's ARN with a wildcard for its UUID (which CloudFormation does not return): pinned by its name."""
    return Stack.of(group).format_arn(
        service="autoscaling",
        resource="autoScalingGroup",
        resource_name=f"*:autoScalingGroupName/{group.ref}",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def acknowledge_group_arn(role: iam.IRole, group: autoscaling.CfnAutoScalingGroup) -> None:
    """cdk-nag's IAM5 finding for :func:`group_arn` in ``role``'s policy, with the reason."""
    stack = Stack.of(group)
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{nag_arn_prefix(stack)}:autoScalingGroup:*:autoScalingGroupName/"
        f"<{stack.get_logical_id(group)}>]",
        "The group ARN carries its generated UUID, which CloudFormation does not return; the name pins the group.",
    )


@dataclass(frozen=True)
class NodeTerminationHandlerProps:
    """Inputs of :class:`NodeTerminationHandler`.

    Attributes:
        cfg: the project configuration (``helm.node_termination_handler``, ``ft.section_timeouts_s``,
            ``cluster.system_node_labels``).
        cluster: the EKS cluster (Helm release and Pod Identity association).
        auto_scaling_group: the GPU Auto Scaling group (lifecycle hook, event filter, IAM resource).
    """

    cfg: ProjectConfig
    cluster: eks.ICluster
    auto_scaling_group: autoscaling.CfnAutoScalingGroup


class NodeTerminationHandler(Construct):
    """Queue, event rules, lifecycle hook, IAM role and the NTH Helm release (see the module docstring).

    Attributes:
        queue: the SQS queue NTH polls.
        lifecycle_hook: the termination lifecycle hook of the GPU group.
        role: the IAM role of NTH's service account.
        chart: the Helm release.
    """

    def __init__(self, scope: Construct, construct_id: str, props: NodeTerminationHandlerProps) -> None:
        super().__init__(scope, construct_id)
        cfg, group = props.cfg, props.auto_scaling_group
        stack = Stack.of(self)
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.minutes(5),
        )
        acknowledge(
            self.queue,
            "AwsSolutions-SQS3",
            "Termination events are only useful within minutes; NTH retries a message through its visibility "
            "timeout, and a dead-letter queue would only hold events for instances that are already gone.",
        )
        rules = {
            "GroupTermination": events.EventPattern(
                source=["aws.autoscaling"],
                detail_type=["EC2 Instance-terminate Lifecycle Action"],
                detail={"AutoScalingGroupName": [group.ref]},
            ),
            "InstanceStateChange": events.EventPattern(
                source=["aws.ec2"],
                detail_type=["EC2 Instance State-change Notification"],
                detail={"state": LEAVING_STATES},
            ),
            "ScheduledChange": events.EventPattern(
                source=["aws.health"],
                detail_type=["AWS Health Event"],
                detail={"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
            ),
        }
        self.rules = {
            name: events.Rule(self, name, event_pattern=pattern, targets=[targets.SqsQueue(self.queue)])
            for name, pattern in rules.items()
        }
        self.lifecycle_hook = autoscaling.CfnLifecycleHook(
            self,
            "TerminationHook",
            auto_scaling_group_name=group.ref,
            lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
            heartbeat_timeout=hook_timeout_seconds(cfg),
            default_result="CONTINUE",
        )

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")),
            description="aws-node-termination-handler (queue processor) of the GPU nodes",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:ReceiveMessage", "sqs:DeleteMessage"], resources=[self.queue.queue_arn])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["autoscaling:CompleteLifecycleAction"], resources=[group_arn(group)])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeTags",
                    "ec2:DescribeInstances",
                ],
                resources=["*"],
            )
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "autoscaling:DescribeAutoScalingInstances, autoscaling:DescribeTags and ec2:DescribeInstances support "
            "no resource-level permissions (the NTH IAM policy); everything else is scoped to the queue and group.",
        )
        acknowledge_group_arn(self.role, group)
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=props.cluster.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=self.role.role_arn,
        )
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=props.cluster,
            chart=CHART,
            repository=CHART_REPOSITORY,
            version=cfg.helm.node_termination_handler,
            namespace=NAMESPACE,
            release=CHART,
            values=chart_values(cfg, self.queue.queue_url, stack.region),
        )
        self.chart.node.add_dependency(self.pod_identity)
