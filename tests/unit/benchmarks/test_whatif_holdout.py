"""The held-out check's plumbing: calibrate on a 2-node run, predict a 4-node one (both simulated here, so the
prediction must land on the measured figure; the real runs on the local cluster are in docs/whatif.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.whatif_holdout import main, predict
from training.whatif.engine import simulate
from training.whatif.params import Dist, FaultClass, LayerParams, Scenario

EXC = FaultClass("exception", {"inprocess": 0.0, "ft_launcher": 0.0, "job": 0.0})
HANG = FaultClass("hang", {"inprocess": 4.0, "ft_launcher": 6.0, "job": 600.0})


def run(path: Path, nodes: int, schedule: tuple[tuple[int, str], ...]) -> None:
    """A simulated run's events.jsonl with one launch event per node, as a multi-node launcher writes them."""
    sc = Scenario(
        steps=240, step_s=0.3, interval=30, stall_s=0.2, write_s=2.0, startup_s=6.0, restore_s=Dist(1.5),
        mode="inprocess-ft", nodes=nodes, fault_classes=(EXC, HANG), fault_schedule=schedule,
        layers={layer: LayerParams(Dist(t)) for layer, t in (("inprocess", 2.0), ("ft_launcher", 5.0), ("job", 9.0))},
    ).validate()  # fmt: skip
    events = simulate(sc, record=True).events or []
    launch = events[0]
    events = [{**launch, "node": n} for n in range(nodes)] + events[1:]
    path.mkdir(parents=True)
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_a_prediction_from_a_consistent_calibration_run_is_exact(tmp_path: Path) -> None:
    run(tmp_path / "two", 2, ((40, "exception"), (100, "hang"), (170, "exception")))
    run(tmp_path / "four", 4, ((55, "hang"), (130, "exception")))
    r = predict(tmp_path / "two", tmp_path / "four", trials=3)
    assert (r["calibration"]["nodes"], r["held_out"]["nodes"]) == (2, 4)
    assert r["fault_schedule"] == ["hang@55", "exception@130"]  # the held-out run's own injected faults
    assert r["predicted"]["p50"] == pytest.approx(r["held_out"]["training_goodput"], abs=1e-4)  # report rounds to 4
    assert abs(r["miss_points"]) < 0.01


def test_cli_prints_the_comparison_and_exits_by_tolerance(tmp_path: Path, capsys) -> None:
    run(tmp_path / "two", 2, ((40, "exception"),))
    run(tmp_path / "four", 4, ((50, "exception"),))
    assert (
        main([str(tmp_path / "two"), str(tmp_path / "four"), "--trials", "2", "--json", str(tmp_path / "r.json")]) == 0
    )
    out = capsys.readouterr().out
    assert "held out" in out and "(4 nodes)" in out
    assert re.search(r"miss: [+-]0\.0 points \(tolerance 5\)", out)  # the report rounds to 4 decimals
    assert json.loads((tmp_path / "r.json").read_text())["held_out"]["nodes"] == 4


def test_a_run_without_node_records_needs_the_count(tmp_path: Path, capsys) -> None:
    run(tmp_path / "two", 2, ())
    (tmp_path / "bare").mkdir()
    events = [json.loads(x) for x in (tmp_path / "two" / "events.jsonl").read_text().splitlines()]
    (tmp_path / "bare" / "events.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events if e["event"] != "launch")
    )
    assert main([str(tmp_path / "two"), str(tmp_path / "bare")]) == 2
    assert "--held-out-nodes: the run's launch events record no node" in capsys.readouterr().err


def test_the_memory_tier_is_read_from_rank_0s_snapshots() -> None:
    from benchmarks.whatif_holdout import memory_tier_of

    snaps = [
        {"event": "mem_snapshot", "rank": 0, "step": s, "stall_s": x} for s, x in ((5, 0.01), (10, 0.03), (15, 0.02))
    ]
    noise = [
        {"event": "mem_snapshot", "rank": 1, "step": 7, "stall_s": 9.0},  # another rank's: not the cadence
        {"event": "mem_snapshot", "rank": 0, "step": 16, "stall_s": 0.0, "error": "ENOSPC"},  # a failed one
    ]
    assert memory_tier_of(snaps + noise) == {"memory_interval": 5, "memory_stall_s": 0.02, "memory_peer_copies": True}
    assert memory_tier_of(noise[:1]) == {}
