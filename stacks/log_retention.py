"""Log groups of the control plane and of Container Insights, created with a retention before anything writes."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnDeletionPolicy
from aws_cdk import aws_logs as logs
from constructs import Construct

from platform_config import ProjectConfig

#: Log groups the CloudWatch observability add-on's Fluent Bit and agent write, by suffix of
#: ``/aws/containerinsights/<cluster>/``.
CONTAINER_INSIGHTS_GROUPS = ("application", "dataplane", "host", "performance")


def control_plane_log_group_name(cfg: ProjectConfig) -> str:
    """The group EKS writes control-plane logs to (fixed by EKS)."""
    return f"/aws/eks/{cfg.cluster.name}/cluster"


def container_log_group_names(cfg: ProjectConfig) -> list[str]:
    """The Container Insights groups of this cluster."""
    return [f"/aws/containerinsights/{cfg.cluster.name}/{suffix}" for suffix in CONTAINER_INSIGHTS_GROUPS]


@dataclass(frozen=True)
class LogRetentionProps:
    """Inputs of :class:`LogRetention`.

    Attributes:
        cfg: the project configuration (``observability.log_retention_days``, ``cluster.name``).
    """

    cfg: ProjectConfig


class LogRetention(Construct):
    """The control-plane and Container Insights log groups with ``observability.log_retention_days``.

    EKS and Fluent Bit create their groups on first write, without a retention (kept forever). Created here first,
    with the names they use, the groups keep ``log_retention_days`` of logs (default 30). The stack that owns them
    must create the cluster after :attr:`control_plane` (EKS writes as soon as it exists). They are retained when
    the stack is deleted (the logs of a failed run outlive its cluster), so a new stack of the same cluster name
    finds them: delete them by hand first (docs/deploy.md, "Teardown").

    Attributes:
        control_plane: ``/aws/eks/<cluster>/cluster``.
        container_groups: ``/aws/containerinsights/<cluster>/{application,dataplane,host,performance}``.
    """

    def __init__(self, scope: Construct, construct_id: str, props: LogRetentionProps) -> None:
        super().__init__(scope, construct_id)
        days = props.cfg.observability.log_retention_days

        def group(group_id: str, name: str) -> logs.CfnLogGroup:
            made = logs.CfnLogGroup(self, group_id, log_group_name=name, retention_in_days=days)
            made.cfn_options.deletion_policy = CfnDeletionPolicy.RETAIN
            made.cfn_options.update_replace_policy = CfnDeletionPolicy.RETAIN
            return made

        self.control_plane = group("ControlPlane", control_plane_log_group_name(props.cfg))
        self.container_groups = [
            group(f"ContainerInsights{suffix.title()}", name)
            for suffix, name in zip(CONTAINER_INSIGHTS_GROUPS, container_log_group_names(props.cfg), strict=True)
        ]
