"""The back-pressure benchmark's comparison of a run with checkpoints against one without, on generated logs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.backpressure import compare, measure, table
from tests.helpers.event_log import TrainerLog
from tests.unit.training.telemetry.test_goodput import scenario_backpressure


def test_a_pair_compares_the_report_with_the_run_without_checkpoints(tmp_path: Path) -> None:
    TrainerLog().start().steps(6).finish().write(tmp_path / "none")  # a step every 1.0 s
    (tmp_path / "async").mkdir()
    (tmp_path / "async" / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in scenario_backpressure()))
    pair = compare(measure(tmp_path, warmup=1))
    assert pair is not None
    # none: steps 2..6 in 4.0 s; async: steps 2..6 from 1002.0 to 1007.2 -> 4 / 5.2; the report: 5 gaps in 6.2 s
    # against 1.0 s without a save -> 5 / 6.2
    assert pair["none_steps_per_s"] == pytest.approx(1.0)
    assert pair["efficiency_vs_none"] == pytest.approx(4 / 5.2)
    assert pair["efficiency_report"] == pytest.approx(5 / 6.2, abs=1e-4)
    assert pair["difference_points"] == pytest.approx(100 * (5 / 6.2 - 4 / 5.2), abs=1e-2)
    assert (pair["backpressure_s"], pair["interval_s"], pair["warned"]) == (2.0, 2.6, True)
    args = argparse.Namespace(size="tiny", steps=6, interval=2, write_delay=3.0)
    text = table([pair, pair], args, "2 CPU workers")
    assert "| 1 | 1.00 | 0.77 | 76.9% | 80.7% | 3.7 | 2.00 |" in text
    assert "| median | 1.00 | 0.77 | 76.9% | 80.7% | 3.7 | 2.00 |" in text


def test_a_missing_run_is_no_pair(tmp_path: Path) -> None:
    TrainerLog().start().steps(3).finish().write(tmp_path / "none")
    assert compare(measure(tmp_path, warmup=1)) is None
