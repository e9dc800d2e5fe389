"""whatif.json, the printed table, whatif.png and the coalesced events.jsonl."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.unit.training.whatif.test_engine import scheduled
from training.telemetry.goodput import analyze, load_events
from training.whatif.engine import run_trials, simulate
from training.whatif.interval import optimum
from training.whatif.outputs import format_table, plot, result_json, write_events, write_json
from training.whatif.sweep import compare_modes, sweep


def result() -> dict:
    sc = scheduled("inprocess")  # the hand-computed in-process timeline: wall 37 s, 20 s productive
    rows = sweep(sc, [5, 10, 20], trials=1)
    return result_json(sc.to_json(), run_trials(sc, 2), optimum(sc), sweep=rows, best_interval_steps=10,
                       modes=compare_modes(sc, trials=1), notes=["a note"])  # fmt: skip


def test_result_json_holds_every_figure(tmp_path: Path) -> None:
    r = result()
    assert r["training_goodput"]["p50"] == pytest.approx(20 / 37)
    assert r["waterfall_s"]["rework"] == pytest.approx(4.0)
    assert r["waterfall_fraction"]["productive"] == pytest.approx(20 / 37)
    assert sum(r["waterfall_fraction"].values()) == pytest.approx(1.0)
    assert r["time_to_target_s"]["p50"] == pytest.approx(37.0)
    assert [p["interval_steps"] for p in r["sweep"]] == [5, 10, 20]
    assert r["best_interval_steps"] == 10 and "daly_interval_steps" in r and r["trials"] == 2
    write_json(r, tmp_path / "out" / "whatif.json")
    assert (tmp_path / "out" / "whatif.json").read_text().startswith("{\n")


def test_table() -> None:
    text = format_table(result())
    assert "training goodput            54.1%    54.1%    54.1%" in text  # 20 / 37
    assert "rework 10.8%" in text  # 4 / 37
    assert "inprocess" in text and "note: a note" in text
    assert "Daly 20, best simulated 10 (steps; >= 2: the write time)" in text
    assert "Daly 20, not swept (steps" in format_table({**result(), "best_interval_steps": None})


def test_plot_is_a_png(tmp_path: Path) -> None:
    plot(result(), tmp_path / "whatif.png")
    data = (tmp_path / "whatif.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1430, 935)  # 13 x 8.5 in at 110 dpi


def test_events_file_reads_back_through_the_report_loader(tmp_path: Path) -> None:
    trial = simulate(scheduled("inprocess"), record=True)
    write_events(trial, tmp_path / "events.jsonl")
    loaded = load_events(tmp_path)
    assert loaded.torn_lines == 0 and loaded.malformed == 0
    a = analyze(loaded.events)
    assert a.training_goodput == pytest.approx(20 / 37, abs=1e-9)
    assert [f.kind for f in a.faults] == ["exception"]
