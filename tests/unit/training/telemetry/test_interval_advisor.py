"""Young/Daly checkpoint interval against the closed forms, and the choice of inputs from a run."""

from __future__ import annotations

import math

import pytest

from tests.helpers.event_log import TrainerLog
from tests.unit.training.telemetry.test_goodput import kill_run, scenario_a, scenario_backpressure
from training.telemetry.goodput import analyze
from training.telemetry.interval_advisor import (
    MIN_REAL_FAULTS,
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


def test_advice_uses_the_mean_stall_and_the_node_mtbf_over_the_nodes() -> None:
    # scenario A: mean stall 0.5 s; node MTBF 2 h on the run's one host -> M = 7200 s; step 1.0 s
    a = advise_for_run(analyze(scenario_a()), node_mtbf_hours=2.0, configured_interval_steps=4)
    assert a.checkpoint_cost_s == pytest.approx(0.5) and a.checkpoint_cost_source.startswith("stall_s_mean")
    assert a.mtbf_s == 7200.0 and a.mtbf_source == "observability.node_mtbf_hours 2 h / 1 node(s)"
    # Daly: x = 0.5 / 14400; sqrt(7200) = 84.852814; bracket = 1 + sqrt(x)/3 + x/9 = 1.0019680; tau = 85.0198 - 0.5
    assert a.interval_s == pytest.approx(84.5198, abs=1e-4)
    assert a.interval_steps == 85
    assert a.current_interval_steps == 4 and a.warning is None


def test_the_node_mtbf_is_divided_among_the_hosts_of_the_run() -> None:
    log = TrainerLog(interval=2, hosts=("node-0", "node-1", "node-2", "node-3"), world=4).start()
    a = advise_for_run(analyze(log.steps(6).finish().sorted_events()), node_mtbf_hours=2.0)
    assert a.mtbf_s == 1800.0 and "/ 4 node(s)" in a.mtbf_source


def test_the_interval_is_never_shorter_than_the_write() -> None:
    # scenario C: mean stall 0.766667 s (back-pressure included), write 3.0 s, a fault every 10 s would give
    # Daly's 3.26 s: above the write. With M = 2 s Daly's interval is 1.2 s: raised to the write, 3 steps of 1.0 s
    run = analyze(scenario_backpressure())
    assert run.checkpoint_summary()["stall_s_mean"] == 0.7667  # (0.1 + 1.1 + 1.1) / 3, to 4 places
    a = advise_for_run(run, node_mtbf_hours=2.0 / 3600)
    assert daly_interval(0.7667, 2.0) < 3.0
    assert a.interval_s == 3.0 and a.interval_steps == 3
    assert "raised from" in a.warning and "the mean write time 3.00 s" in a.warning


def test_mtbf_from_injected_faults_only_is_a_warning() -> None:
    # the injected kill run: 1 fault in 20 s and no configured node MTBF
    a = advise_for_run(analyze(kill_run(inject=True).sorted_events()), node_mtbf_hours=None)
    assert a.mtbf_s == pytest.approx(20.0) and a.mtbf_source == "measured: wall 20.0 s / 1 fault(s)"
    assert a.warning.startswith("MTBF from injected faults only (1 in 20.0 s)")
    # a real fault is no test's rate: no warning, but one is not enough to replace the configured MTBF
    real = advise_for_run(analyze(kill_run(inject=False).sorted_events()), node_mtbf_hours=None)
    assert real.warning is None
    assert advise_for_run(analyze(kill_run(inject=False).sorted_events()), node_mtbf_hours=1.0).mtbf_s == 3600.0


def test_enough_real_faults_measure_the_mtbf() -> None:
    log = TrainerLog(interval=2, layer="ft_launcher").start().steps(2)
    for _ in range(MIN_REAL_FAULTS):  # the workers vanish (no exit), ft_launcher starts new ones 2 s later
        log.restart += 1
        log.new_processes()
        log.start(restart=("ft_launcher", "heartbeat_timeout"), from_step=log.step, dt_start=2.0).steps(log.step + 2)
    run = analyze(log.finish().sorted_events())
    assert sum(not f.injected for f in run.faults) == MIN_REAL_FAULTS == 3
    a = advise_for_run(run, node_mtbf_hours=1000.0)
    assert a.mtbf_s == pytest.approx(run.wall_s / 3) and "3 real fault(s)" in a.mtbf_source
