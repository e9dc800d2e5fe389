"""Young's and Daly's interval in steps for a scenario, and the smallest interval an asynchronous write allows.

The two formulas themselves are checked in tests/unit/training/telemetry/test_interval_advisor.py (the report's
advice imports them from here)."""

from __future__ import annotations

import math

import pytest

from training.whatif.interval import (
    checkpoint_cost_s,
    daly_interval,
    interval_steps,
    min_interval_steps,
    optimum,
    young_interval,
)
from training.whatif.params import FaultClass, Scenario

ONE_CLASS = (FaultClass("exception", {"inprocess": 0.0}, rate_per_hour=1.0),)  # M = 3600 s on one node


def test_daly_is_the_mtbf_when_a_checkpoint_costs_twice_as_much() -> None:
    assert daly_interval(10.0, 4.0) == 4.0
    with pytest.raises(ValueError, match="must be positive"):
        young_interval(0.0, 100.0)


def test_checkpoint_cost_is_the_stall_or_stall_plus_write() -> None:
    sc = Scenario(step_s=1.0, stall_s=2.0, write_s=30.0).validate()
    assert checkpoint_cost_s(sc) == 2.0
    assert checkpoint_cost_s(sc.with_(checkpoint_mode="sync")) == 32.0


def test_an_async_interval_must_cover_the_write() -> None:
    sc = Scenario(steps=10000, step_s=0.2, write_s=5.0).validate()
    assert min_interval_steps(sc) == 25  # 5 s / 0.2 s
    assert min_interval_steps(sc.with_(write_s=5.1)) == 26  # 25.5 rounded up
    assert min_interval_steps(sc.with_(checkpoint_mode="sync")) == 1  # a sync write is part of the stall
    assert interval_steps(1.0, sc) == 25  # 5 steps would wait on the write: raised to 25
    assert interval_steps(1e9, sc) == 10000 and interval_steps(math.inf, sc) == 10000


def test_optimum_in_steps() -> None:
    # δ = 30 s, M = 3600 s: Young sqrt(2·30·3600) = 464.76 s, Daly 444.97 s; 1 s steps
    sc = Scenario(steps=100000, step_s=1.0, stall_s=30.0, fault_classes=ONE_CLASS).validate()
    opt = optimum(sc)
    assert (opt["young_interval_steps"], opt["daly_interval_steps"]) == (465, 445)
    assert opt["cluster_mtbf_s"] == pytest.approx(3600.0)
    assert opt["checkpoint_cost_s"] == 30.0


def test_optimum_without_faults_or_without_cost() -> None:
    no_faults = optimum(Scenario(steps=500, step_s=1.0, stall_s=1.0, fault_classes=()).validate())
    assert no_faults["daly_interval_steps"] == 500 and no_faults["daly_interval_s"] is None  # one save, at the end
    free = optimum(Scenario(steps=500, step_s=1.0, write_s=7.0, fault_classes=ONE_CLASS).validate())
    assert free["daly_interval_steps"] == 7 == free["min_interval_steps"]  # δ = 0: as often as the write allows
