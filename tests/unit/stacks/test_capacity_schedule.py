"""Capacity Block timing: desired 0 before the block, scheduled scale-out at start and scale-in before the end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from platform_config import config_from_dict
from stacks.capacity_schedule import CapacityPlan, ScheduleTooClose, capacity_plan, iso
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import resources

START = datetime(2027, 1, 4, 11, 30, tzinfo=UTC)
END = datetime(2027, 1, 18, 11, 30, tzinfo=UTC)
SCALE_IN = datetime(2027, 1, 18, 10, 30, tzinfo=UTC)


def block_cfg(**capacity):
    window = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0", "start": START, "end": END}
    return config_from_dict({"gpu_nodes": {"node_count": 4, "max_nodes": 4, "capacity": {**window, **capacity}}})


def test_before_the_block_starts() -> None:
    assert capacity_plan(block_cfg(), datetime(2026, 12, 1, tzinfo=UTC)) == CapacityPlan(
        desired=None, scale_out_at=START, scale_in_at=SCALE_IN
    )


@pytest.mark.parametrize("now", [START, datetime(2027, 1, 10, tzinfo=UTC)])
def test_while_the_block_runs_only_the_scale_in_is_left(now: datetime) -> None:
    assert capacity_plan(block_cfg(), now) == CapacityPlan(desired=4, scale_in_at=SCALE_IN)


@pytest.mark.parametrize("now", [SCALE_IN, END, datetime(2027, 3, 1, tzinfo=UTC)])
def test_after_the_scale_in_the_group_stays_empty_with_a_warning(now: datetime) -> None:
    plan = capacity_plan(block_cfg(), now)
    assert (plan.desired, plan.scale_out_at, plan.scale_in_at) == (0, None, None)
    assert plan.warning is not None and "scales in at 2027-01-18T10:30:00Z (end 2027-01-18T11:30:00Z)" in plan.warning


def test_scale_in_lead_follows_the_config() -> None:
    plan = capacity_plan(block_cfg(scale_in_minutes_before_end=90), datetime(2026, 12, 1, tzinfo=UTC))
    assert plan.scale_in_at == datetime(2027, 1, 18, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "capacity",
    [{"type": "on-demand"}, {"type": "capacity-reservation", "reservation_id": "cr-0123456789abcdef0"}],
)
def test_on_demand_and_odcr_have_no_actions(capacity: dict) -> None:
    cfg = config_from_dict({"gpu_nodes": {"node_count": 2, "capacity": capacity}})
    assert capacity_plan(cfg, datetime(2026, 12, 1, tzinfo=UTC)) == CapacityPlan(desired=2)


def test_iso_is_utc_with_z() -> None:
    assert iso(datetime.fromisoformat("2027-01-04T12:30:00+01:00")) == "2027-01-04T11:30:00Z"


def test_prod_template_schedules_both_actions(prod_env: Synthesized) -> None:
    actions = sorted(
        (
            r["Properties"]
            for r in resources(
                prod_env.template_json(prod_env.platform.gpu), "AWS::AutoScaling::ScheduledAction"
            ).values()
        ),
        key=lambda p: p["StartTime"],
    )
    group = {"Ref": "GpuNodesAutoScalingGroup481E5AE1"}
    assert actions == [
        {
            "AutoScalingGroupName": group,
            "StartTime": "2027-01-04T11:30:00Z",
            "MinSize": 0,
            "DesiredCapacity": 9,  # 8 training nodes and the hot spare
            "MaxSize": 9,
        },
        {
            "AutoScalingGroupName": group,
            "StartTime": "2027-01-18T10:30:00Z",
            "MinSize": 0,
            "DesiredCapacity": 0,
            "MaxSize": 9,
        },
    ]
    # more than 30 minutes before the block's end, when EC2 starts reclaiming the instances
    assert (END - datetime.fromisoformat(actions[1]["StartTime"].replace("Z", "+00:00"))).total_seconds() > 30 * 60


def test_on_demand_template_has_none(default_env: Synthesized) -> None:
    assert not resources(default_env.template_json(default_env.platform.gpu), "AWS::AutoScaling::ScheduledAction")


def test_spare_nodes_join_the_group_but_not_the_job() -> None:
    cfg = config_from_dict({"gpu_nodes": {"node_count": 2, "spare_nodes": 1, "max_nodes": 3}})
    assert capacity_plan(cfg, datetime(2026, 12, 1, tzinfo=UTC)) == CapacityPlan(desired=3)
    window = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0", "start": START, "end": END}
    block = config_from_dict({"gpu_nodes": {"node_count": 4, "spare_nodes": 1, "max_nodes": 5, "capacity": window}})
    assert capacity_plan(block, datetime(2027, 1, 10, tzinfo=UTC)).desired == 5


def test_spares_must_fit_under_max_nodes() -> None:
    from platform_config import ConfigError

    with pytest.raises(ConfigError, match=r"node_count \+ spare_nodes <= max_nodes, got 0 <= 2 <= 3 <= 2"):
        config_from_dict({"gpu_nodes": {"node_count": 2, "spare_nodes": 1, "max_nodes": 2}})


def test_no_action_within_the_deploy_margin_enters_the_template() -> None:
    """Synthesized 59 minutes before the start (margin 60): the scale-out action could be past at deploy, so synth
    stops with the reason; 61 minutes before, both actions are planned."""
    with pytest.raises(ScheduleTooClose, match=r"start 2027-01-04T11:30:00Z is less than .*schedule_margin_minutes"):
        capacity_plan(block_cfg(), START - timedelta(minutes=59))
    early = capacity_plan(block_cfg(), START - timedelta(minutes=61))
    assert (early.scale_out_at, early.scale_in_at) == (START, SCALE_IN)


def test_a_scale_in_within_the_margin_counts_as_passed() -> None:
    plan = capacity_plan(block_cfg(), SCALE_IN - timedelta(minutes=30))
    assert (plan.desired, plan.scale_out_at, plan.scale_in_at) == (0, None, None)
    assert plan.warning is not None and "less than schedule_margin_minutes (60)" in plan.warning
    assert capacity_plan(block_cfg(), SCALE_IN - timedelta(minutes=61)).scale_in_at == SCALE_IN


def test_every_planned_action_is_at_least_the_margin_after_now() -> None:
    """Whatever the planning time, no StartTime in the plan is earlier than now + schedule_margin_minutes."""
    for minutes in range(-24 * 60, 16 * 24 * 60, 17):
        now = START + timedelta(minutes=minutes)
        for margin in (0, 60, 240):
            cfg = block_cfg(schedule_margin_minutes=margin)
            try:
                plan = capacity_plan(cfg, now)
            except ScheduleTooClose:
                assert now < START < now + timedelta(minutes=margin)
                continue
            for at in (plan.scale_out_at, plan.scale_in_at):
                assert at is None or at >= now + timedelta(minutes=margin)
