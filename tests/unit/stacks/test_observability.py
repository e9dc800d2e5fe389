"""The observability construct on a minimal stack with a real ``aws_eks_v2.Cluster`` (aws_cdk.assertions, cdk-nag)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Match, Template

from platform_config import config_from_dict
from stacks.compliance import add_compliance_checks
from stacks.observability import (
    ADDON_NAME,
    AGENT_SERVICE_ACCOUNT,
    Observability,
    ObservabilityProps,
    agent_configuration,
)
from training.telemetry.emf import METRICS

CDK_JSON = Path(__file__).resolve().parents[3] / "cdk.json"


def _app(nag: bool = False) -> cdk.App:
    """An App with cdk.json's context (feature flags), as `cdk synth` would build it."""
    context = json.loads(CDK_JSON.read_text()).get("context", {}) if CDK_JSON.is_file() else {}
    app = cdk.App(context=context)
    if nag:
        add_compliance_checks(app)
    return app


def _stack(overrides: dict[str, Any] | None = None, *, nag: bool = False, topic: bool = False):
    cfg = config_from_dict({"observability": {"emf_metrics": True, **(overrides or {})}})
    app = _app(nag)
    stack = cdk.Stack(app, "ObsTest", env=cdk.Environment(account="111122223333", region="us-east-1"))
    cluster = eks.Cluster(
        stack,
        "Cluster",
        version=eks.KubernetesVersion.V1_36,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        vpc=None,
    )
    alarm_topic = sns.Topic(stack, "Alarms") if topic else None
    obs = Observability(stack, "Observability", ObservabilityProps(cfg=cfg, cluster=cluster, alarm_topic=alarm_topic))
    return app, stack, obs, cfg


@pytest.fixture(scope="module")
def synthesized():
    _, stack, _, cfg = _stack({"alarm_restarts_per_window": 4, "alarm_window_minutes": 20})
    return Template.from_stack(stack), cfg


def test_addon_with_pod_identity_and_emf_listener(synthesized) -> None:
    template, _ = synthesized
    template.has_resource_properties(
        "AWS::EKS::Addon",
        {
            "AddonName": ADDON_NAME,
            "PodIdentityAssociations": [
                {"ServiceAccount": AGENT_SERVICE_ACCOUNT, "RoleArn": {"Fn::GetAtt": [Match.any_value(), "Arn"]}}
            ],
        },
    )
    addon = next(
        r for r in template.find_resources("AWS::EKS::Addon").values() if r["Properties"]["AddonName"] == ADDON_NAME
    )
    values = json.loads(addon["Properties"]["ConfigurationValues"])
    assert values == agent_configuration(True)
    assert "emf" in values["agent"]["config"]["logs"]["metrics_collected"]
    assert values["containerLogs"]["enabled"] is True


def test_agent_role_trusts_pod_identity(synthesized) -> None:
    template, _ = synthesized
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": ["sts:AssumeRole", "sts:TagSession"],
                                "Principal": {"Service": "pods.eks.amazonaws.com"},
                            }
                        )
                    ]
                )
            },
            "ManagedPolicyArns": Match.array_with([Match.object_like({"Fn::Join": Match.any_value()})]),
        },
    )
    roles = template.find_resources("AWS::IAM::Role")
    assert any(
        "CloudWatchAgentServerPolicy" in json.dumps(r["Properties"].get("ManagedPolicyArns", []))
        for r in roles.values()
    )


def test_repeated_restart_alarm_uses_the_configured_window(synthesized) -> None:
    template, cfg = synthesized
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "Restarts",
            "Namespace": cfg.observability.metric_namespace,
            "Statistic": "Sum",
            "Period": 20 * 60,
            "Threshold": 4,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "EvaluationPeriods": 1,
            "TreatMissingData": "notBreaching",
            "Dimensions": [{"Name": "JobName", "Value": cfg.job.job_name}],
        },
    )


def test_stale_checkpoint_alarm(synthesized) -> None:
    template, cfg = synthesized
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "CheckpointAge",
            "Statistic": "Maximum",
            "Threshold": cfg.observability.alarm_stale_checkpoint_minutes * 60,
            "ComparisonOperator": "GreaterThanThreshold",
        },
    )


def test_dashboard_reads_the_metrics_training_emits(synthesized) -> None:
    template, cfg = synthesized
    (dash,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dash["Properties"]["DashboardBody"])
    assert dash["Properties"]["DashboardName"] == f"{cfg.cluster.name}-{cfg.job.job_name}-goodput"
    for name in ("TrainingGoodput", "InfrastructureGoodput", "StepsCompleted", "Restarts", "CheckpointAge",
                 "CheckpointStall", "RollbackSteps", "RecoveryTime"):  # fmt: skip
        assert name in body, name
        assert name in METRICS, f"{name} is not a metric training/telemetry/emf.py writes"
    assert cfg.observability.metric_namespace in body
    assert "SEARCH(" in body and "Cause" in body  # restarts by layer and cause
    assert "alarm" in body.lower()


def test_alarm_topic_gets_alarm_and_ok_actions() -> None:
    _, stack, _, _ = _stack(topic=True)
    template = Template.from_stack(stack)
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    notifying = [a for a in alarms.values() if "AlarmActions" in a["Properties"]]
    assert len(alarms) == 4 and len(notifying) == 2  # the silent-Job alarm's two parts notify through the composite
    (composite,) = template.find_resources("AWS::CloudWatch::CompositeAlarm").values()
    for a in [*notifying, composite]:
        assert a["Properties"]["AlarmActions"] and a["Properties"]["OKActions"]


def test_window_longer_than_a_day_is_rejected() -> None:
    with pytest.raises(ValueError, match="one day"):
        _stack({"alarm_window_minutes": 24 * 60 + 1})


def nag_findings(app: cdk.App) -> list[tuple[str, str]]:
    """(rule, construct path) of every unacknowledged AwsSolutions finding; synth raises and points to a report."""
    try:
        app.synth()
        return []
    except Exception as exc:
        m = re.search(r"found in: (\S+)", str(exc))
        assert m, f"synth failed without a validation report: {exc}"
        report = json.loads(Path(m.group(1)).read_text())
    return [
        (v["ruleName"], c["constructPath"])
        for plugin in report["pluginReports"]
        for v in plugin["violations"]
        for c in v["violatingConstructs"]
    ]


def test_cdk_nag_reports_nothing_for_the_construct() -> None:
    """AwsSolutions findings of the whole app; the bare test cluster's own are not this construct's business."""
    app, _, _, _ = _stack(nag=True)
    findings = nag_findings(app)
    assert any("/Cluster/" in path for _, path in findings), "cdk-nag did not run (the bare cluster has findings)"
    mine = [f for f in findings if "/Observability/" in f[1]]
    assert mine == []


def _dashboard_metrics(template: Template, namespace: str) -> set[tuple[str, frozenset[str]]]:
    """(metric, dimension names) of every line the dashboard draws: metric arrays and SEARCH expressions."""
    (dash,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dash["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p for p in parts if isinstance(p, str)))
    out = set()
    for widget in body["widgets"]:
        for line in widget.get("properties", {}).get("metrics", []):
            if line and line[0] == namespace:
                names = [x for x in line[1:] if isinstance(x, str)]
                out.add((names[0], frozenset(names[1::2])))
            for item in line:
                m = isinstance(item, dict) and re.search(
                    r"SEARCH\('\{([^}]*)\} MetricName=\"(\w+)\"", item.get("expression", "")
                )
                if m:
                    out.add((m.group(2), frozenset(m.group(1).split(",")[1:])))
    return out


def test_training_emits_every_metric_the_dashboard_draws_during_the_run(synthesized, tmp_path) -> None:
    """Rank 0's emitter on the recorded run's scenario (an in-process and an ft_launcher recovery, two commits)
    writes every (metric, dimensions) the dashboard reads, before the run's last event."""
    from tests.helpers.event_log import emf_records, recorded_run_replica

    template, cfg = synthesized
    wanted = _dashboard_metrics(template, cfg.observability.metric_namespace)
    assert ("RecoveryTime", frozenset({"JobName", "Layer"})) in wanted and len(wanted) >= 12
    events = recorded_run_replica().sorted_events()
    last = events[-1]["ts"]
    emitted = set()
    for rec in emf_records(events, tmp_path):
        assert rec["_aws"]["Timestamp"] < last * 1000  # during the run, not only at its end
        (directive,) = rec["_aws"]["CloudWatchMetrics"]
        for dims in directive["Dimensions"]:
            emitted |= {(m["Name"], frozenset(dims)) for m in directive["Metrics"]}
    assert wanted <= emitted, wanted - emitted
