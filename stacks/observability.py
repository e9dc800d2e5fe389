"""CloudWatch observability of the training: goodput dashboard, alarms, and the EKS CloudWatch add-on.

What it makes (one construct, :class:`Observability`):

* the EKS add-on ``amazon-cloudwatch-observability`` (CloudWatch agent + Fluent Bit DaemonSets) with an IAM role
  for its ``cloudwatch-agent`` service account through a Pod Identity association. Fluent Bit ships every
  container's stdout/stderr to ``/aws/containerinsights/<cluster>/application``. The agent configuration turns
  on Container Insights and the agent's EMF listener (TCP/UDP 25888 on each node: the agent runs with host
  networking), which turns the training's embedded-metric-format records (``training/telemetry/emf.py``; pods set
  ``AWS_EMF_AGENT_ENDPOINT=udp://$(HOST_IP):25888``) into metrics;
* a dashboard over those metrics (namespace ``observability.metric_namespace``, dimension ``JobName`` =
  ``job.job_name``): goodput, step rate, restarts by cause and layer, checkpoint freshness, checkpoint stall and
  write time, rollback and recovery time, and the alarm states;
* three alarms: repeated restarts (``Restarts`` summed over ``alarm_window_minutes`` >=
  ``alarm_restarts_per_window``), a stale checkpoint (``CheckpointAge`` above ``alarm_stale_checkpoint_minutes``)
  and a silent Job (:mod:`stacks.silent_job_alarm`: no ``StepsCompleted`` for ``alarm_heartbeat_minutes`` while
  the Job's pods run). A recovery that works raises ``Restarts`` once and keeps the checkpoint fresh; repeated failure
  trips one or both; a Job that hangs or dies without a word trips the third.

Usage (in the stack that owns the cluster)::

    from stacks.observability import Observability, ObservabilityProps

    obs = Observability(
        self,
        "Observability",
        ObservabilityProps(cfg=cfg, cluster=cluster, depends_on=[system_nodes]),
    )
    # obs.dashboard, obs.restarts_alarm, obs.stale_checkpoint_alarm, obs.addon, obs.agent_role

The restart alarm counts restarts in consecutive windows of ``alarm_window_minutes`` (CloudWatch sums a metric per
period), so restarts that straddle a window boundary count in two windows. The stale-checkpoint alarm treats missing
data as not breaching: a job that stopped emitting (finished, or dead) does not keep it in ALARM; a dead job shows
in the restart alarm and in the Job status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct, IDependable

from platform_config import ProjectConfig
from stacks.compliance import acknowledge, managed_policy_finding
from stacks.silent_job_alarm import silent_job_alarm
from training.telemetry.emf import AGENT_PORT

#: The EKS add-on name and the service account its CloudWatch agent runs as (fixed by the add-on).
ADDON_NAME = "amazon-cloudwatch-observability"
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
#: Port of the agent's EMF listener (TCP and UDP).
EMF_PORT = AGENT_PORT
#: Longest alarm period CloudWatch accepts for a single-period alarm (period x evaluation periods <= 1 day).
MAX_ALARM_WINDOW_MINUTES = 24 * 60
#: Must match training/telemetry/emf.py (the dashboard reads the names the trainer writes).
JOB_DIMENSION = "JobName"


@dataclass(frozen=True)
class ObservabilityProps:
    """Inputs of :class:`Observability`.

    Attributes:
        cfg: the project configuration (``observability.*``, ``job.job_name``, ``cluster.name``).
        cluster: the EKS cluster the add-on goes into.
        depends_on: created before the add-on, e.g. the system node group (the add-on turns ACTIVE only once its
            pods run somewhere). The cluster's Pod Identity agent add-on is added automatically when it exists.
        addon_version: add-on version (e.g. ``v4.5.0-eksbuild.1``); None = the EKS default for the cluster version.
        emf_listener: turn on the agent's EMF listener (port 25888) so that EMF records become metrics.
        alarm_topic: SNS topic notified when an alarm fires and clears; None = no notifications.
        dashboard_name: None = ``<cluster.name>-<job.job_name>-goodput``.
    """

    cfg: ProjectConfig
    cluster: eks.Cluster
    depends_on: Sequence[IDependable] = field(default_factory=tuple)
    addon_version: str | None = None
    emf_listener: bool = True
    alarm_topic: sns.ITopic | None = None
    dashboard_name: str | None = None


def agent_configuration(emf_listener: bool) -> dict:
    """The add-on's ``configurationValues``: Container Insights, Fluent Bit container logs, optionally EMF."""
    metrics_collected: dict = {"kubernetes": {"enhanced_container_insights": True}}
    if emf_listener:
        metrics_collected["emf"] = {}
    return {
        "agent": {"config": {"logs": {"metrics_collected": metrics_collected}}},
        "containerLogs": {"enabled": True},
    }


class Observability(Construct):
    """Dashboard, alarms and the CloudWatch observability add-on (see the module docstring).

    Attributes:
        addon: the ``amazon-cloudwatch-observability`` add-on.
        agent_role: the IAM role of the CloudWatch agent (Pod Identity).
        dashboard: the goodput dashboard.
        restarts_alarm: repeated restarts within the window.
        stale_checkpoint_alarm: the newest committed checkpoint is older than the limit.
        silent_job_alarm: the composite alarm of a running Job that reports no step (see the module docstring).
    """

    def __init__(self, scope: Construct, construct_id: str, props: ObservabilityProps) -> None:
        super().__init__(scope, construct_id)
        obs = props.cfg.observability
        if obs.alarm_window_minutes > MAX_ALARM_WINDOW_MINUTES:
            raise ValueError(
                f"observability.alarm_window_minutes={obs.alarm_window_minutes}: CloudWatch alarm periods go up "
                f"to {MAX_ALARM_WINDOW_MINUTES} minutes (one day)"
            )
        self._ns = obs.metric_namespace
        self._job = props.cfg.job.job_name

        # ---------------------------------------------------------------- add-on + Pod Identity role
        self.agent_role = iam.Role(
            self,
            "AgentRole",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")),
            description="CloudWatch agent and Fluent Bit of the amazon-cloudwatch-observability add-on",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("CloudWatchAgentServerPolicy")],
        )
        acknowledge(
            self.agent_role,
            managed_policy_finding("CloudWatchAgentServerPolicy"),
            "The CloudWatch observability add-on documents CloudWatchAgentServerPolicy for its agent; AWS keeps it "
            "in step with what the agent writes (metrics, log groups and streams it creates per cluster).",
        )
        self.addon = eks.Addon(
            self,
            "CloudWatchObservability",
            cluster=props.cluster,
            addon_name=ADDON_NAME,
            addon_version=props.addon_version,
            configuration_values=agent_configuration(props.emf_listener),
        )
        cfn = self.addon.node.default_child
        cfn.add_property_override("ResolveConflicts", "OVERWRITE")  # type: ignore[union-attr]
        cfn.add_property_override(  # type: ignore[union-attr]
            "PodIdentityAssociations",
            [{"ServiceAccount": AGENT_SERVICE_ACCOUNT, "RoleArn": self.agent_role.role_arn}],
        )
        agent = props.cluster.eks_pod_identity_agent
        for dep in [*props.depends_on, *([agent] if agent is not None else [])]:
            self.addon.node.add_dependency(dep)

        # ---------------------------------------------------------------- alarms
        window = cdk.Duration.minutes(obs.alarm_window_minutes)
        self.restarts_alarm = cw.Alarm(
            self,
            "RepeatedRestarts",
            alarm_description=(
                f"{obs.alarm_restarts_per_window} or more restarts of job {self._job} within "
                f"{obs.alarm_window_minutes} min: recovery is not sticking (repeated failure)."
            ),
            metric=self.metric("Restarts", "Sum", window),
            threshold=obs.alarm_restarts_per_window,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        heartbeat = cdk.Duration.minutes(obs.alarm_heartbeat_minutes)
        stale_s = obs.alarm_stale_checkpoint_minutes * 60
        self.stale_checkpoint_alarm = cw.Alarm(
            self,
            "StaleCheckpoint",
            alarm_description=(
                f"The newest committed checkpoint of job {self._job} is older than "
                f"{obs.alarm_stale_checkpoint_minutes} min: saves fail or training is stuck."
            ),
            metric=self.metric("CheckpointAge", "Maximum", cdk.Duration.minutes(1)),
            threshold=stale_s,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.silent_job_alarm = silent_job_alarm(self, props.cfg, self.metric("StepsCompleted", "Sum", heartbeat))
        if props.alarm_topic is not None:
            for alarm in (self.restarts_alarm, self.stale_checkpoint_alarm, self.silent_job_alarm):
                alarm.add_alarm_action(cw_actions.SnsAction(props.alarm_topic))
                alarm.add_ok_action(cw_actions.SnsAction(props.alarm_topic))

        # ---------------------------------------------------------------- dashboard
        five = cdk.Duration.minutes(5)
        minute = cdk.Duration.minutes(1)
        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=props.dashboard_name or f"{props.cfg.cluster.name}-{self._job}-goodput",
            default_interval=cdk.Duration.hours(6),
        )
        self.dashboard.add_widgets(
            cw.TextWidget(
                markdown=(
                    f"# Goodput of job `{self._job}`\n"
                    "Training goodput = time of steps kept in the final model / wall time; infrastructure "
                    "goodput = time workers were in the training loop / wall time (definitions: docs/goodput.md). "
                    f"Metrics: namespace `{self._ns}`, from training/telemetry/emf.py."
                ),
                width=24,
                height=2,
            ),
        )
        self.dashboard.add_widgets(
            cw.SingleValueWidget(
                title="Goodput (latest report, %)",
                metrics=[
                    self.metric("TrainingGoodput", "Average", five),
                    self.metric("InfrastructureGoodput", "Average", five),
                ],
                width=6,
                height=6,
            ),
            cw.GraphWidget(
                title="Goodput (%)",
                left=[
                    self.metric("TrainingGoodput", "Average", five),
                    self.metric("InfrastructureGoodput", "Average", five),
                ],
                left_y_axis=cw.YAxisProps(min=0, max=100),
                width=9,
            ),
            cw.GraphWidget(
                title="Step rate (steps per minute) and tokens/s",
                left=[self.metric("StepsCompleted", "Sum", minute, label="steps / min")],
                right=[self.metric("TokensPerSecond", "Average", minute, label="tokens / s")],
                width=9,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Restarts by layer and cause",
                left=[
                    self.search(
                        "Restarts", "Sum", ["Layer", "Cause"], five, "${PROP('Dim.Layer')}/${PROP('Dim.Cause')}"
                    )
                ],
                stacked=True,
                view=cw.GraphWidgetView.BAR,
                width=12,
            ),
            cw.GraphWidget(
                title=f"Restarts per {obs.alarm_window_minutes} min (alarm at {obs.alarm_restarts_per_window})",
                left=[self.metric("Restarts", "Sum", window)],
                left_annotations=[
                    cw.HorizontalAnnotation(value=obs.alarm_restarts_per_window, label="repeated-restart alarm")
                ],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Checkpoint freshness: age of the newest committed checkpoint (s)",
                left=[self.metric("CheckpointAge", "Maximum", minute)],
                left_annotations=[cw.HorizontalAnnotation(value=stale_s, label="stale-checkpoint alarm")],
                width=12,
            ),
            cw.GraphWidget(
                title="Checkpoint stall (training blocked) and write time (s)",
                left=[self.metric("CheckpointStall", "p50", five), self.metric("CheckpointWrite", "p50", five)],
                right=[self.metric("CheckpointsCommitted", "Sum", five), self.metric("CheckpointsFailed", "Sum", five)],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Rollback per restart (steps recomputed)",
                left=[self.metric("RollbackSteps", "Maximum", five), self.metric("RollbackSteps", "Sum", five)],
                width=8,
            ),
            cw.GraphWidget(
                title="Recovery time by layer (s): fault to first new step",
                left=[self.search("RecoveryTime", "Maximum", ["Layer"], five, "${PROP('Dim.Layer')}")],
                width=8,
            ),
            cw.AlarmStatusWidget(
                title="Alarms",
                alarms=[self.restarts_alarm, self.stale_checkpoint_alarm, self.silent_job_alarm],
                width=8,
                height=6,
            ),
        )

    def metric(self, name: str, statistic: str, period: cdk.Duration, label: str | None = None) -> cw.Metric:
        """A job-level metric of the namespace (dimension ``JobName`` only)."""
        return cw.Metric(
            namespace=self._ns,
            metric_name=name,
            dimensions_map={JOB_DIMENSION: self._job},
            statistic=statistic,
            period=period,
            label=label,
        )

    def search(self, name: str, statistic: str, dims: list[str], period: cdk.Duration, label: str) -> cw.MathExpression:
        """One line per value of ``dims`` (a SEARCH expression: causes are open-ended)."""
        schema = ",".join([self._ns, JOB_DIMENSION, *dims])
        expr = (
            f'SEARCH(\'{{{schema}}} MetricName="{name}" {JOB_DIMENSION}="{self._job}"\', '
            f"'{statistic}', {int(period.to_seconds())})"
        )
        return cw.MathExpression(expression=expr, label=label, period=period)
