"""Where the alarms go: an SNS topic of this stack with an e-mail subscription, or an existing topic by ARN."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from platform_config import ProjectConfig
from stacks.compliance import acknowledge


@dataclass(frozen=True)
class AlarmTopicProps:
    """Inputs of :class:`AlarmTopic`.

    Attributes:
        cfg: the project configuration (``observability.alarm_email`` / ``alarm_topic_arn``, ``cluster.name``).
    """

    cfg: ProjectConfig


class AlarmTopic(Construct):
    """The alarms' SNS topic.

    * ``observability.alarm_topic_arn``: that topic, imported (its policy must let CloudWatch publish);
    * ``observability.alarm_email``: a topic ``<cluster.name>-alarms`` (TLS-only publishing) with that address
      subscribed (AWS e-mails a confirmation link; nothing is delivered until it is followed);
    * neither (the offline demo): no topic, :attr:`topic` is None.

    Attributes:
        topic: the topic, or None.
    """

    def __init__(self, scope: Construct, construct_id: str, props: AlarmTopicProps) -> None:
        super().__init__(scope, construct_id)
        obs = props.cfg.observability
        self.topic: sns.ITopic | None = None
        if obs.alarm_topic_arn:
            self.topic = sns.Topic.from_topic_arn(self, "Topic", obs.alarm_topic_arn)
        elif obs.alarm_email:
            topic = sns.Topic(
                self,
                "Topic",
                topic_name=f"{props.cfg.cluster.name}-alarms",
                display_name="Training alarms",
                enforce_ssl=True,
            )
            topic.add_subscription(subscriptions.EmailSubscription(obs.alarm_email))
            acknowledge(
                topic,
                "AwsSolutions-SNS2",
                "CloudWatch alarms cannot publish to a topic encrypted with the AWS-managed SNS key, and the messages "
                "carry alarm names and states only (no data of the training).",
            )
            self.topic = topic
