"""CloudWatch metrics and alarms (``observability``) and the node MTBF prior."""

from __future__ import annotations

from pydantic import Field

from platform_config.schema.base import _Strict

#: Node MTBF from Llama 3 (arXiv 2407.21783, Table 5): 2,048 nodes x 54 days x 24 h / 419 unexpected interruptions.
LLAMA3_NODE_MTBF_HOURS = 2048 * 54 * 24 / 419


class ObservabilityConfig(_Strict):
    """CloudWatch metrics and alarms."""

    emf_metrics: bool = False  # training prints CloudWatch embedded-metric-format lines
    metric_namespace: str = "FsdpResilience"
    alarm_restarts_per_window: int = Field(default=3, ge=1)
    alarm_window_minutes: int = Field(default=30, ge=1)
    alarm_stale_checkpoint_minutes: int = Field(default=60, ge=1)
    #: Mean time between failures of one node, in hours: the job's MTBF is this / its node count. The goodput
    #: report's checkpoint-interval advice (Young/Daly) and the goodput planner use it. Default: Llama 3's 2,048
    #: nodes x 54 days / 419 unexpected interruptions (arXiv 2407.21783, Table 5) = 6,335 h. None: no prior; the
    #: advice then measures it from the run's faults (and warns when those were all injected).
    node_mtbf_hours: float | None = Field(default=LLAMA3_NODE_MTBF_HOURS, gt=0)
