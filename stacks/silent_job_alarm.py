"""The silent-Job alarm: a running training Job that reports no step (missing data counts as breaching).

A composite of two alarms, only the composite notifying:

* ``StepsCompleted`` (the training's EMF metric) summed over ``observability.alarm_heartbeat_minutes`` below 1, with
  missing data treated as breaching: a Job that prints nothing is exactly the case to catch;
* Container Insights' ``namespace_number_of_running_pods`` of ``job.namespace`` at least ``gpu_nodes.node_count``
  (the Job's pods run), missing data not breaching, so that an idle cluster stays quiet.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from platform_config import ProjectConfig

#: Namespace of the Container Insights metrics the CloudWatch observability add-on's agent publishes.
CONTAINER_INSIGHTS_NAMESPACE = "ContainerInsights"


def silent_job_alarm(scope: Construct, cfg: ProjectConfig, steps: cw.Metric) -> cw.CompositeAlarm:
    """The composite alarm (ids ``NoSteps``, ``JobPodsRunning``, ``SilentJob`` under ``scope``); ``steps`` is the
    job's ``StepsCompleted`` Sum over the heartbeat period."""
    minutes = cfg.observability.alarm_heartbeat_minutes
    job, namespace, pods = cfg.job.job_name, cfg.job.namespace, cfg.gpu_nodes.node_count
    no_steps = cw.Alarm(
        scope,
        "NoSteps",
        alarm_description=f"No StepsCompleted from job {job} for {minutes} min (missing data breaches).",
        metric=steps,
        threshold=1,
        comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cw.TreatMissingData.BREACHING,
    )
    running = cw.Alarm(
        scope,
        "JobPodsRunning",
        alarm_description=f"At least {pods} pods run in namespace {namespace}.",
        metric=cw.Metric(
            namespace=CONTAINER_INSIGHTS_NAMESPACE,
            metric_name="namespace_number_of_running_pods",
            dimensions_map={"ClusterName": cfg.cluster.name, "Namespace": namespace},
            statistic="Minimum",
            period=cdk.Duration.minutes(minutes),
        ),
        threshold=pods,
        comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
    )
    return cw.CompositeAlarm(
        scope,
        "SilentJob",
        alarm_description=(
            f"Job {job} runs ({pods}+ pods in {namespace}) but reported no step for {minutes} min: hung, or dead "
            "without a word."
        ),
        alarm_rule=cw.AlarmRule.all_of(
            cw.AlarmRule.from_alarm(no_steps, cw.AlarmState.ALARM),
            cw.AlarmRule.from_alarm(running, cw.AlarmState.ALARM),
        ),
    )
