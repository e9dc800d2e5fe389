"""CloudWatch metrics and alarms (``observability``) and the node MTBF prior."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from platform_config.schema.base import _Strict

#: Retention periods CloudWatch Logs accepts, in days (PutRetentionPolicy).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
_TOPIC_ARN = r"^arn:aws(-cn|-us-gov)?:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$"

#: Node MTBF from Llama 3 (arXiv 2407.21783, Table 5): 2,048 nodes x 54 days x 24 h / 419 unexpected interruptions.
LLAMA3_NODE_MTBF_HOURS = 2048 * 54 * 24 / 419


class ObservabilityConfig(_Strict):
    """CloudWatch metrics and alarms."""

    #: The training prints CloudWatch embedded-metric-format lines (the alarms read them). Must be true with
    #: ``environment_kind: deploy``; off in the offline demo.
    emf_metrics: bool = False
    metric_namespace: str = "FsdpResilience"
    alarm_restarts_per_window: int = Field(default=3, ge=1)
    alarm_window_minutes: int = Field(default=30, ge=1)
    alarm_stale_checkpoint_minutes: int = Field(default=60, ge=1)
    #: A running Job that reports no ``StepsCompleted`` for this long raises the heartbeat alarm (missing data
    #: counts as breaching while the Job's pods run). Longer than the slowest step plus a checkpoint save.
    alarm_heartbeat_minutes: int = Field(default=15, ge=2, le=1440)
    #: Where alarms go: an e-mail address (the stack creates an SNS topic and subscribes it; confirm the e-mail
    #: AWS sends) or an existing topic's ARN. One of them is required with ``environment_kind: deploy``.
    alarm_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    alarm_topic_arn: str | None = Field(default=None, pattern=_TOPIC_ARN)
    #: Retention of the EKS control-plane log group and the Container Insights log groups, in days.
    log_retention_days: int = 30
    #: Mean time between failures of one node, in hours: the job's MTBF is this / its node count. The goodput
    #: report's checkpoint-interval advice (Young/Daly) and the goodput planner use it. Default: Llama 3's 2,048
    #: nodes x 54 days / 419 unexpected interruptions (arXiv 2407.21783, Table 5) = 6,335 h. None: no prior; the
    #: advice then measures it from the run's faults (and warns when those were all injected).
    node_mtbf_hours: float | None = Field(default=LLAMA3_NODE_MTBF_HOURS, gt=0)

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        if v not in LOG_RETENTION_DAYS:
            raise ValueError(f"CloudWatch Logs accepts {', '.join(map(str, LOG_RETENTION_DAYS))} days, got {v}")
        return v

    @model_validator(mode="after")
    def _one_target(self) -> ObservabilityConfig:
        if self.alarm_email and self.alarm_topic_arn:
            raise ValueError("set observability.alarm_email or observability.alarm_topic_arn, not both")
        return self
