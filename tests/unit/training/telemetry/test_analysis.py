"""The analysis record (:mod:`training.telemetry.analysis`): its statistics and the figures derived from its fields."""

from __future__ import annotations

import pytest

from training.telemetry.analysis import RunAnalysis, percentile, summary_stats
from training.telemetry.records import Fault


def test_percentile_linear_interpolation() -> None:
    # [1, 2, 3, 4]: p50 at position 1.5 -> 2.5; p95 at position 2.85 -> 3 + 0.85 * (4 - 3) = 3.85
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([4.0, 1.0, 3.0, 2.0], 95) == pytest.approx(3.85)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None
    assert summary_stats([1.0, 3.0]) == {"p50": 2.0, "p95": pytest.approx(2.9), "max": 3.0, "n": 2}


def test_goodputs_come_from_the_filled_in_fields() -> None:
    a = RunAnalysis(t0=100.0, t1=200.0, productive_s=60.0, working_intervals=[(100.0, 150.0), (160.0, 200.0)])
    assert (a.wall_s, a.working_s, a.training_goodput) == (100.0, 90.0, 0.6)
    assert a.infrastructure_goodput is None  # no start/restart_end event: unmeasurable
    a.has_open_events = True
    assert a.infrastructure_goodput == 0.9
    assert RunAnalysis().training_goodput is None  # no wall time


def test_recovery_times_are_grouped_by_layer_unknown_for_none() -> None:
    faults = [
        Fault(kind="exception", step=3, rank=0, ts=1.0, layer=layer, recovered_ts=1.0 + secs)
        for layer, secs in [("inprocess", 2.0), ("inprocess", 4.0), (None, 9.0)]
    ]
    assert RunAnalysis(faults=faults).values_by_layer("recovery_s") == {"inprocess": [2.0, 4.0], "unknown": [9.0]}
