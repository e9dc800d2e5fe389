"""Node termination handling: queue, rules, lifecycle hook, Pod Identity role and the NTH chart."""

from __future__ import annotations

import json

from stacks.node_termination_handler import (
    CHART,
    CHART_REPOSITORY,
    MANAGED_TAG,
    SERVICE_ACCOUNT,
    chart_values,
    drain_seconds,
    hook_timeout_seconds,
)
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import only, resources

GROUP = {"Ref": "GpuNodesAutoScalingGroup481E5AE1"}


def gpu(env: Synthesized) -> dict:
    return env.template_json(env.platform.gpu)


def test_timeouts_cover_the_training_pods_grace_period(default_env: Synthesized) -> None:
    grace = int(default_env.cfg.ft.section_timeouts_s["checkpoint"])  # the training pod's terminationGracePeriod
    assert drain_seconds(default_env.cfg) == grace + 60 == 360
    assert hook_timeout_seconds(default_env.cfg) == 480 > drain_seconds(default_env.cfg)


def test_encrypted_tls_only_queue(any_env: Synthesized) -> None:
    tpl = gpu(any_env)
    queue = only(tpl, "AWS::SQS::Queue")["Properties"]
    assert queue == {"MessageRetentionPeriod": 300, "SqsManagedSseEnabled": True}
    policy = json.dumps(only(tpl, "AWS::SQS::QueuePolicy")["Properties"])
    assert '"aws:SecureTransport": "false"' in policy and "events.amazonaws.com" in policy


def test_event_rules_feed_the_queue(any_env: Synthesized) -> None:
    rules = [r["Properties"] for r in resources(gpu(any_env), "AWS::Events::Rule").values()]
    rules = [r for r in rules if "EventPattern" in r]  # not the fencing agent's schedule (test_node_fencing.py)
    patterns = sorted(json.dumps(r["EventPattern"], sort_keys=True) for r in rules)
    assert patterns == sorted(
        json.dumps(p, sort_keys=True)
        for p in [
            {
                "source": ["aws.autoscaling"],
                "detail-type": ["EC2 Instance-terminate Lifecycle Action"],
                "detail": {"AutoScalingGroupName": [GROUP]},
            },
            {
                "source": ["aws.ec2"],
                "detail-type": ["EC2 Instance State-change Notification"],
                "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
            },
            {
                "source": ["aws.health"],
                "detail-type": ["AWS Health Event"],
                "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
            },
        ]
    )
    for r in rules:
        (target,) = r["Targets"]
        assert target["Arn"]["Fn::GetAtt"][0].startswith("NodeTerminationHandlerQueue")


def test_termination_lifecycle_hook(any_env: Synthesized) -> None:
    hook = only(gpu(any_env), "AWS::AutoScaling::LifecycleHook")["Properties"]
    assert hook == {
        "AutoScalingGroupName": GROUP,
        "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
        "HeartbeatTimeout": hook_timeout_seconds(any_env.cfg),
        "DefaultResult": "CONTINUE",
    }


def test_pod_identity_role_is_scoped(any_env: Synthesized) -> None:
    tpl = gpu(any_env)
    assoc = only(tpl, "AWS::EKS::PodIdentityAssociation")["Properties"]
    assert (assoc["Namespace"], assoc["ServiceAccount"]) == ("kube-system", SERVICE_ACCOUNT)
    role_id = assoc["RoleArn"]["Fn::GetAtt"][0]
    trust = tpl["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    (policy,) = [
        p for p in resources(tpl, "AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_action = {json.dumps(s["Action"]): s["Resource"] for s in statements}
    assert by_action['["sqs:DeleteMessage", "sqs:ReceiveMessage"]']["Fn::GetAtt"][1] == "Arn"
    group_arn = json.dumps(by_action['"autoscaling:CompleteLifecycleAction"'])
    assert ":autoScalingGroup:*:autoScalingGroupName/" in group_arn and GROUP["Ref"] in group_arn
    assert (
        by_action['["autoscaling:DescribeAutoScalingInstances", "autoscaling:DescribeTags", "ec2:DescribeInstances"]']
        == "*"
    )


def test_chart_is_pinned_and_drains_with_the_pods_grace(any_env: Synthesized) -> None:
    tpl = gpu(any_env)
    chart = only(tpl, "Custom::AWSCDK-EKS-HelmChart")["Properties"]
    assert (chart["Chart"], chart["Repository"], chart["Version"], chart["Namespace"]) == (
        CHART,
        CHART_REPOSITORY,
        any_env.cfg.helm.node_termination_handler,
        "kube-system",
    )
    values = chart_values(any_env.cfg, "https://sqs.example/q", "us-east-1")
    assert values["enableSqsTerminationDraining"] is True
    assert values["checkTagBeforeDraining"] is True and values["managedTag"] == MANAGED_TAG
    assert values["podTerminationGracePeriod"] == -1
    assert values["nodeTerminationGracePeriod"] == drain_seconds(any_env.cfg)
    assert values["nodeSelector"] == any_env.cfg.cluster.system_node_labels
    assert values["serviceAccount"] == {"create": True, "name": SERVICE_ACCOUNT}
    rendered = json.dumps(chart["Values"])
    assert "NodeTerminationHandlerQueue" in rendered and "enableSqsTerminationDraining" in rendered
