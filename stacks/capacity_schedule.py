"""When the GPU group has nodes: desired capacity and the scheduled actions of a Capacity Block.

The EKS Capacity Block guide asks for three things, which :func:`capacity_plan` turns into a plan for the
moment of synthesis (``now``):

* desired capacity 0 until the block starts (instances cannot launch before; a failed launch would fail the stack);
* a scheduled scale-out to ``node_count + spare_nodes`` at ``gpu_nodes.capacity.start``;
* a scheduled scale-in to 0 ``capacity.scale_in_minutes_before_end`` (more than 30) minutes before ``end``, so the
  node termination handler can drain the pods (and training checkpoint) before EC2 reclaims the instances.

EC2 Auto Scaling refuses a scheduled action whose start time is in the past, and the template is deployed some
time after it is synthesized, so no action due within ``capacity.schedule_margin_minutes`` (default 60) of the
planning time ``now`` goes into the template: a stack deployed while the block runs gets its nodes at once and only
the scale-in action; a scale-in that close, or past, gives 0 nodes and a synth warning; a block start that close
stops synth (:class:`ScheduleTooClose`) until the block has started, since neither the action nor nodes before the
start can be deployed. On-demand and ODCR groups have no actions. The
group's size is ``node_count + spare_nodes`` (``GpuNodesConfig.group_size``). The Auto Scaling group's
``AutoScalingScheduledAction`` update policy keeps a later deploy from resetting a size that an action (or an
operator) changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from aws_cdk import Annotations
from aws_cdk import aws_autoscaling as autoscaling
from constructs import Construct

from platform_config import ConfigError, ProjectConfig
from platform_config.schema import CapacityType


class ScheduleTooClose(ConfigError):
    """A Capacity Block starts so soon after the planning time that its scale-out action could be past at deploy
    (a :class:`ConfigError`: ``cdk synth`` ends with its message, not a traceback)."""


@dataclass(frozen=True)
class CapacityPlan:
    """The group's size at deploy and its scheduled changes.

    Attributes:
        desired: ``DesiredCapacity`` of the group; None leaves it out (the group starts at ``MinSize`` = 0).
        scale_out_at: when a scheduled action raises the group to its size; None = no such action.
        scale_in_at: when a scheduled action lowers the group to 0; None = no such action.
        warning: a synth-time warning (the block is over), or None.
    """

    desired: int | None
    scale_out_at: datetime | None = None
    scale_in_at: datetime | None = None
    warning: str | None = None


def capacity_plan(cfg: ProjectConfig, now: datetime) -> CapacityPlan:
    """The plan for ``cfg.gpu_nodes`` as seen at ``now`` (timezone-aware)."""
    nodes = cfg.gpu_nodes
    cap = nodes.capacity
    if cap.type is not CapacityType.CAPACITY_BLOCK:
        return CapacityPlan(desired=nodes.group_size)
    start, scale_in = cap.start, cap.scale_in_at
    assert start is not None and scale_in is not None  # the schema requires both for a Capacity Block
    deployed = now + timedelta(minutes=cap.schedule_margin_minutes)  # the earliest time an action may be due
    if deployed <= start:
        return CapacityPlan(desired=None, scale_out_at=start, scale_in_at=scale_in)
    if now < start:
        raise ScheduleTooClose(
            f"gpu_nodes.capacity.start {iso(start)} is less than capacity.schedule_margin_minutes "
            f"({cap.schedule_margin_minutes}) after the planning time {iso(now)}: the scale-out action could be in "
            "the past when CloudFormation creates it. Synthesize and deploy the GPU stack once the block has started "
            "(it then gets its nodes at once), or pass -c now=<the expected deploy time>."
        )
    if deployed < scale_in:
        return CapacityPlan(desired=nodes.group_size, scale_in_at=scale_in)
    return CapacityPlan(
        desired=0,
        warning=(
            f"gpu_nodes.capacity: the Capacity Block {cap.reservation_id} scales in at {iso(scale_in)} (end "
            f"{iso(cap.end)}), less than schedule_margin_minutes ({cap.schedule_margin_minutes}) after the planning "
            f"time {iso(now)} or already past; the GPU group stays at 0 nodes. Set start/end and reservation_id of "
            "your next block."  # type: ignore[arg-type]
        ),
    )


def iso(moment: datetime) -> str:
    """UTC ISO 8601 with a ``Z``, the form scheduled actions take."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class CapacityScheduleProps:
    """Inputs of :class:`CapacitySchedule`.

    Attributes:
        cfg: the project configuration (``gpu_nodes``).
        plan: what :func:`capacity_plan` decided.
        auto_scaling_group: the GPU Auto Scaling group (its ``ref`` is the group name).
    """

    cfg: ProjectConfig
    plan: CapacityPlan
    auto_scaling_group: autoscaling.CfnAutoScalingGroup


class CapacitySchedule(Construct):
    """The scheduled scale-out / scale-in actions of :class:`CapacityPlan` (none for on-demand or an ODCR).

    Attributes:
        scale_out: the action at the block's start, or None.
        scale_in: the action before the block's end, or None.
    """

    def __init__(self, scope: Construct, construct_id: str, props: CapacityScheduleProps) -> None:
        super().__init__(scope, construct_id)
        nodes, plan, group = props.cfg.gpu_nodes, props.plan, props.auto_scaling_group
        self.scale_out: autoscaling.CfnScheduledAction | None = None
        self.scale_in: autoscaling.CfnScheduledAction | None = None

        def action(action_id: str, at: datetime, min_size: int, desired: int) -> autoscaling.CfnScheduledAction:
            return autoscaling.CfnScheduledAction(
                self,
                action_id,
                auto_scaling_group_name=group.ref,
                start_time=iso(at),
                min_size=min_size,
                desired_capacity=desired,
                max_size=nodes.max_nodes,
            )

        if plan.scale_out_at is not None:
            self.scale_out = action("ScaleOutAtBlockStart", plan.scale_out_at, nodes.min_nodes, nodes.group_size)
        if plan.scale_in_at is not None:
            self.scale_in = action("ScaleInBeforeBlockEnd", plan.scale_in_at, 0, 0)
        if plan.warning:
            Annotations.of(self).add_warning_v2("fsdp:capacityBlockOver", plan.warning)
