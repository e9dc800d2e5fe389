"""The report's pictures: valid PNGs of the size asked for, drawing the analysis' numbers."""

from __future__ import annotations

import math
import struct
from pathlib import Path

from tests.unit.training.telemetry.test_goodput import kill_run, scenario_a
from training.telemetry.goodput import analyze
from training.telemetry.plots import layer_colour, plot_recovery_hist, plot_recovery_waterfall, plot_timeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_timeline_draws_steps_faults_rollback_and_commits(tmp_path: Path) -> None:
    out = tmp_path / "timeline.png"
    drawn = plot_timeline(analyze(scenario_a()), out)
    assert _png_size(out) == (1210, 605)  # 11 x 5.5 in at 110 dpi
    # steps 1..4 and their second executions 5..8 are kept; the first 5..7 (5.5, 6.5, 7.5 s) were rolled back
    assert drawn["rolled_back"] == [(5.5, 5), (6.5, 6), (7.5, 7)]
    assert drawn["kept"][:4] == [(1.0, 1), (2.0, 2), (3.0, 3), (4.0, 4)] and len(drawn["kept"]) == 8
    assert drawn["commits"] == [(5.5, 4), (14.3, 8)]
    # fault at 7.8 s, detected at 8.0, step 5 again at 9.8; the arrow from step 8 down to the restored step 4
    assert drawn["faults"] == [(7.8, 8.0, 9.8, 8, 4)]


def test_timeline_of_an_unrecovered_fault_and_of_an_empty_run(tmp_path: Path) -> None:
    events = [e for e in scenario_a() if e["ts"] < 1008.0]  # the run ends before anything restarted
    ((fault, detected, recovered, y0, y1),) = plot_timeline(analyze(events), tmp_path / "t.png")["faults"]
    assert fault == 7.8 and math.isnan(detected) and math.isnan(recovered) and y0 == y1 == 8
    assert plot_timeline(analyze([]), tmp_path / "e.png") == {"kept": [], "rolled_back": [], "commits": [],
                                                              "faults": []}  # fmt: skip
    assert _png_size(tmp_path / "e.png")[0] > 0


def test_recovery_histogram(tmp_path: Path) -> None:
    out = tmp_path / "recovery_hist.png"
    assert plot_recovery_hist(analyze(scenario_a()), out) == {"inprocess": 1}
    assert _png_size(out) == (770, 440)
    assert plot_recovery_hist(analyze([]), tmp_path / "empty.png") == {}


def test_recovery_waterfall_splits_each_recovery(tmp_path: Path) -> None:
    out = tmp_path / "waterfall.png"
    a = analyze(scenario_a())
    a.faults += analyze(kill_run(inject=True).sorted_events()).faults
    # scenario A: detection 0.2, restart 0.3, restore 1.5; the injected kill: 0.35, 3.0, 2.0
    assert plot_recovery_waterfall(a, out) == [
        [(0.0, 0.2), (0.2, 0.3), (0.5, 1.5)],
        [(0.0, 0.35), (0.35, 3.0), (3.35, 2.0)],
    ]
    assert _png_size(out) == (990, 242)  # 9 x (1.2 + 0.5 x 2) in at 110 dpi
    assert plot_recovery_waterfall(analyze([]), tmp_path / "none.png") == []


def test_layer_colours_are_distinct() -> None:
    colours = [layer_colour(x) for x in ("inprocess", "ft_launcher", "job", None)]
    assert len(set(colours)) == 4
