"""Where alarms go: the e-mail topic of a deploy environment, none in the demo."""

from __future__ import annotations

import json

import pytest

from platform_config import ConfigError, config_from_dict, load_config
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import only, resources


def test_prod_alarms_reach_the_configured_address(prod_env: Synthesized) -> None:
    tpl = prod_env.template_json(prod_env.platform.cluster)
    topic_id, topic = next(iter(resources(tpl, "AWS::SNS::Topic").items()))
    assert topic["Properties"]["TopicName"] == "fsdp-resilience-alarms"
    sub = only(tpl, "AWS::SNS::Subscription")["Properties"]
    assert (sub["Protocol"], sub["Endpoint"], sub["TopicArn"]) == ("email", "oncall@example.com", {"Ref": topic_id})
    policy = json.dumps(only(tpl, "AWS::SNS::TopicPolicy"))
    assert "aws:SecureTransport" in policy  # TLS-only publishing
    alarms = [
        *resources(tpl, "AWS::CloudWatch::Alarm").values(),
        *resources(tpl, "AWS::CloudWatch::CompositeAlarm").values(),
    ]
    notifying = [a for a in alarms if "AlarmActions" in a["Properties"]]
    assert len(notifying) == 3  # restarts, stale checkpoint, silent Job (its two parts notify through it)
    for a in notifying:
        assert a["Properties"]["AlarmActions"] == [{"Ref": topic_id}] == a["Properties"]["OKActions"]


def test_demo_has_no_topic(default_env: Synthesized) -> None:
    tpl = default_env.template_json(default_env.platform.cluster)
    assert not resources(tpl, "AWS::SNS::Topic")
    assert all("AlarmActions" not in a["Properties"] for a in resources(tpl, "AWS::CloudWatch::Alarm").values())


def _prod(**observability: object) -> dict:
    raw = load_config(env="prod").model_dump(mode="json")
    raw["observability"].update(observability)
    return raw


def test_deploy_needs_a_target_and_emf_metrics() -> None:
    with pytest.raises(ConfigError, match=r"alarm_email or observability\.alarm_topic_arn is required"):
        config_from_dict(_prod(alarm_email=None))
    with pytest.raises(ConfigError, match=r"emf_metrics must be true with environment_kind 'deploy'"):
        config_from_dict(_prod(emf_metrics=False))
    with pytest.raises(ConfigError, match="not both"):
        config_from_dict(_prod(alarm_topic_arn="arn:aws:sns:us-west-2:111122223333:oncall"))
    arn = config_from_dict(_prod(alarm_email=None, alarm_topic_arn="arn:aws:sns:us-west-2:111122223333:oncall"))
    assert arn.observability.alarm_topic_arn == "arn:aws:sns:us-west-2:111122223333:oncall"
