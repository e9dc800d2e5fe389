"""The silent-Job alarm: no step reported (missing data breaching) while the Job's pods run."""

from __future__ import annotations

import json

from tests.helpers.stack_synth import Synthesized


def test_silent_job_alarm_breaches_on_missing_steps_only_while_the_job_runs(any_env: Synthesized) -> None:
    template, cfg = any_env.template(any_env.platform.cluster), any_env.cfg
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "StepsCompleted",
            "Statistic": "Sum",
            "Period": 900,  # observability.alarm_heartbeat_minutes, 15 by default
            "Threshold": 1,
            "ComparisonOperator": "LessThanThreshold",
            "TreatMissingData": "breaching",
        },
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "ContainerInsights",
            "MetricName": "namespace_number_of_running_pods",
            "Dimensions": [
                {"Name": "ClusterName", "Value": cfg.cluster.name},
                {"Name": "Namespace", "Value": cfg.job.namespace},
            ],
            "Threshold": cfg.gpu_nodes.node_count,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "TreatMissingData": "notBreaching",
        },
    )
    assert cfg.gpu_nodes.node_count in (2, 8)  # default and prod: the Job's pods, spares not counted
    (composite,) = template.find_resources("AWS::CloudWatch::CompositeAlarm").values()
    rule = json.dumps(composite["Properties"]["AlarmRule"])
    assert rule.count("ALARM(") == 2 and " AND " in rule
