"""Young/Daly checkpoint interval against the closed forms, and the choice of inputs from a run."""

from __future__ import annotations

import math

import pytest

from tests.unit.training.telemetry.test_goodput import scenario_a, scenario_d
from training.telemetry.goodput import analyze
from training.telemetry.interval_advisor import (
    advise,
    advise_for_run,
    daly_interval,
    expected_waste_fraction,
    young_interval,
)


def test_young_closed_form() -> None:
    # sqrt(2 * 30 * 3600) = sqrt(216000) = 464.758...
    assert young_interval(30.0, 3600.0) == pytest.approx(464.7580015)


def test_daly_closed_form() -> None:
    # delta = 30, M = 3600: x = 30 / 7200 = 0.0041667; sqrt(x) = 0.0645497
    # bracket = 1 + 0.0645497/3 + 0.0041667/9 = 1 + 0.0215166 + 0.000463 = 1.0219796
    # tau = 464.7580015 * 1.0219796 - 30 = 474.9731 - 30 = 444.9731
    assert daly_interval(30.0, 3600.0) == pytest.approx(444.9731, abs=1e-3)
    d, m = 7.5, 1234.0
    x = d / (2 * m)
    assert daly_interval(d, m) == pytest.approx(math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d)


def test_daly_when_checkpoint_costs_more_than_two_mtbf() -> None:
    assert daly_interval(200.0, 100.0) == 100.0
    assert daly_interval(200.0, 100.0 - 1e-9) == pytest.approx(100.0)  # delta >= 2M -> M


def test_daly_is_close_to_young_for_cheap_checkpoints() -> None:
    # delta << M: the correction terms vanish, tau -> sqrt(2 delta M) - delta
    assert daly_interval(1.0, 1e6) == pytest.approx(young_interval(1.0, 1e6), rel=2e-3)


def test_young_minimises_first_order_waste() -> None:
    d, m = 10.0, 5000.0
    t = young_interval(d, m)
    best = expected_waste_fraction(t, d, m)
    assert best < expected_waste_fraction(t * 0.8, d, m)
    assert best < expected_waste_fraction(t * 1.25, d, m)
    # at the optimum: delta/tau + tau/(2M) = 2 * sqrt(delta / (2M))
    assert best == pytest.approx(2 * math.sqrt(d / (2 * m)))


def test_invalid_inputs_raise() -> None:
    with pytest.raises(ValueError):
        young_interval(0.0, 10.0)
    with pytest.raises(ValueError):
        daly_interval(1.0, -1.0)


def test_advise_in_seconds_and_steps() -> None:
    a = advise(30.0, 3600.0, 2.0, current_interval_steps=100)
    # 444.9731 s / 2 s per step = 222.5 -> 222 steps; Young 464.758 / 2 = 232.4 -> 232
    assert a.interval_s == pytest.approx(444.9731, abs=1e-3)
    assert (a.interval_steps, a.young_interval_steps) == (222, 232)
    # waste now: 30/200 + 200/7200 = 0.15 + 0.027778 = 0.177778
    assert a.expected_waste_current == pytest.approx(0.177778, abs=1e-6)
    assert a.expected_waste_suggested < a.expected_waste_current
    assert a.reason is None


def test_advise_says_what_is_missing() -> None:
    a = advise(None, None, 1.0)
    assert a.interval_s is None and "checkpoint cost" in a.reason and "MTBF" in a.reason
    assert advise(1.0, None, 1.0).reason.startswith("needs an MTBF")


def test_advice_for_an_async_run_uses_the_stall_and_measured_mtbf() -> None:
    # scenario A: async, stall p50 0.5 s; 1 failure in 14 s -> M = 14; step time without checkpoints 1.0 s
    # Daly: x = 0.5 / 28 = 0.017857; sqrt(14) = 3.741657; bracket = 1 + 0.133631/3 + 0.017857/9 = 1.046528
    # tau = 3.741657 * 1.046528 - 0.5 = 3.415751 -> 3 steps; Young 3.741657 -> 4 steps
    a = advise_for_run(analyze(scenario_a()), configured_interval_steps=4)
    assert a.checkpoint_cost_s == pytest.approx(0.5)
    assert "stall" in a.checkpoint_cost_source
    assert a.mtbf_s == pytest.approx(14.0)
    assert a.interval_s == pytest.approx(3.415751, abs=1e-5)
    assert (a.interval_steps, a.young_interval_steps) == (3, 4)
    assert a.current_interval_steps == 4  # one commit: no measured spacing, so the configured one


def test_advice_for_a_sync_run_uses_the_write_and_configured_mtbf() -> None:
    a = advise_for_run(analyze(scenario_d()), mtbf_hours=2.0)
    assert a.checkpoint_cost_s == pytest.approx(0.5)
    assert "write" in a.checkpoint_cost_source
    assert a.mtbf_s == 7200.0 and "configured" in a.mtbf_source
    assert a.interval_s == pytest.approx(daly_interval(0.5, 7200.0))
