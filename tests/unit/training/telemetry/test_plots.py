"""The report's pictures: valid PNGs that show what the analysis holds."""

from __future__ import annotations

import struct
from pathlib import Path

from tests.unit.training.telemetry.test_goodput import scenario_a, scenario_d
from training.telemetry.goodput import analyze
from training.telemetry.plots import layer_colour, plot_recovery_hist, plot_timeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_timeline_marks_faults_by_layer_rollback_and_checkpoints(tmp_path: Path) -> None:
    out = tmp_path / "timeline.png"
    labels = plot_timeline(analyze(scenario_d()), out)
    assert _png_size(out) == (1210, 605)  # 11 x 5.5 in at 110 dpi
    assert "fault recovered by inprocess" in labels and "fault recovered by ft_launcher" in labels
    assert "step (rolled back)" in labels and "step (kept)" in labels
    assert "checkpoint committed" in labels
    assert "detection" in labels and any(lbl.startswith("rollback") for lbl in labels)


def test_timeline_without_faults(tmp_path: Path) -> None:
    events = [e for e in scenario_a() if e["event"] not in ("fault_injected", "restart_begin", "restart_end")]
    labels = plot_timeline(analyze(events), tmp_path / "t.png")
    assert not any(lbl.startswith("fault") for lbl in labels)


def test_timeline_of_an_empty_run(tmp_path: Path) -> None:
    assert plot_timeline(analyze([]), tmp_path / "t.png") == []
    assert _png_size(tmp_path / "t.png")[0] > 0


def test_recovery_histogram(tmp_path: Path) -> None:
    out = tmp_path / "recovery_hist.png"
    assert plot_recovery_hist(analyze(scenario_d()), out) == {"ft_launcher": 1, "inprocess": 1}
    assert _png_size(out) == (770, 440)
    assert plot_recovery_hist(analyze([]), tmp_path / "empty.png") == {}


def test_layer_colours_are_distinct() -> None:
    colours = [layer_colour(x) for x in ("inprocess", "ft_launcher", "job", None)]
    assert len(set(colours)) == 4
