"""Interval sweeps, the comparison of recovery modes and the recommendation the report prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from platform_config import config_from_dict, load_config
from tests.unit.training.whatif.test_engine import EXC, scheduled
from training.telemetry.report import build_report
from training.whatif.engine import simulate
from training.whatif.interval import optimum
from training.whatif.outputs import write_events
from training.whatif.params import LLAMA3_NODE_MTBF_HOURS, Dist, FaultClass, LayerParams, Scenario
from training.whatif.sweep import best_interval, compare_modes, for_report, interval_grid, recommend, sweep

REPO = Path(__file__).resolve().parents[4]


def test_grid_spans_the_write_bound_to_the_run_and_holds_the_marks() -> None:
    sc = Scenario(steps=10000, step_s=0.2, interval=100, stall_s=1.0, write_s=5.0, node_mtbf_hours=10.0).validate()
    grid = interval_grid(sc, points=7)
    opt = optimum(sc)
    assert grid[0] == 25 and grid[-1] == 10000 and grid == sorted(set(grid))
    assert {100, opt["young_interval_steps"], opt["daly_interval_steps"]} <= set(grid)


def test_best_interval_takes_the_highest_mean_then_the_highest_p5() -> None:
    rows = [
        {"interval_steps": 10, "training_goodput_mean": 0.80, "training_goodput_p5": 0.70},
        {"interval_steps": 20, "training_goodput_mean": 0.85, "training_goodput_p5": 0.60},
        {"interval_steps": 40, "training_goodput_mean": 0.85, "training_goodput_p5": 0.75},
    ]
    assert best_interval(rows) == 40


def test_the_simulated_optimum_is_within_20_percent_of_daly() -> None:
    """Validation 1: δ = 5 s << τ ≈ 704 s << M = 50,000 s; a 2,000,000 s run sees about 40 faults."""
    exc = FaultClass("exception", {"inprocess": 0.0}, rate_per_hour=3600 / 50000)
    restart = {k: LayerParams(Dist(10.0)) for k in ("inprocess", "ft_launcher", "job")}
    sc = Scenario(steps=2_000_000, step_s=1.0, interval=700, stall_s=5.0, write_s=0.0, mode="inprocess",
                  fault_classes=(exc,), layers=restart, trials=120).validate()  # fmt: skip
    daly = optimum(sc)["daly_interval_steps"]
    assert daly == 704  # sqrt(2·5·50000)·(1 + sqrt(5e-5)/3 + 5e-5/9) - 5 = 703.8 s
    rows = sweep(sc, [round(daly * f / 4) for f in range(1, 13)])  # 0.25 τ ... 3 τ
    assert abs(best_interval(rows) - daly) <= 0.2 * daly


def test_modes_compared_on_the_same_faults() -> None:
    # the hand-computed exception at step 15 (test_engine): in-process 3 s, ft_launcher 8 s, a new pod 10 s + 5 s
    rows = {r["mode"]: r for r in compare_modes(scheduled("inprocess-ft"))}
    assert rows["inprocess"]["training_goodput_p50"] == pytest.approx(20 / 37)
    assert rows["inprocess-ft"]["training_goodput_p50"] == pytest.approx(20 / 37)
    assert rows["ft-launcher"]["training_goodput_p50"] == pytest.approx(20 / 42)
    assert rows["async-ckpt"]["training_goodput_p50"] == pytest.approx(20 / 49)
    # sync: saves block 0.5 + 2 s and nothing is written in the background: 5+10+2.5+4, +10+5+2, +10+2.5 = 51;
    # k8s-only is the same (the published baseline: synchronous saves, only the job layer)
    assert rows["sync-ckpt"]["training_goodput_p50"] == pytest.approx(20 / 51)
    assert rows["k8s-only"]["training_goodput_p50"] == pytest.approx(20 / 51)
    assert rows["sync-ckpt"]["checkpoint_mode"] == rows["k8s-only"]["checkpoint_mode"] == "sync"
    assert rows["k8s-only"]["layers"] == ["job"]


def test_recommend_picks_the_best_mode_and_its_interval() -> None:
    rec = recommend(scheduled("k8s-only"), trials=1, points=5)
    assert set(rec["by_mode"]) == {"sync-ckpt", "async-ckpt", "inprocess", "ft-launcher", "inprocess-ft", "k8s-only"}
    assert rec["mode"] == "inprocess"  # in-process recovers the exception fastest; inprocess-ft ties, listed later
    assert recommend(scheduled("inprocess-ft"), trials=1, points=5)["mode"] == "inprocess-ft"  # the tie: configured
    assert rec["training_goodput_mean"] == max(m["training_goodput_mean"] for m in rec["by_mode"].values())
    assert rec["by_mode"]["sync-ckpt"] == rec["by_mode"]["k8s-only"]  # the same layers and saves: simulated once


def simulated_report(tmp_path: Path) -> dict:
    """report.json of a simulated in-process run: 0.5 s steps, async saves (1 s stall, 30 s write), 3 s restarts."""
    run = Scenario(
        steps=300, step_s=0.5, interval=20, stall_s=1.0, write_s=30.0, restore_s=Dist(2.0), mode="inprocess",
        fault_classes=(EXC,), layers={k: LayerParams(Dist(3.0)) for k in ("inprocess", "ft_launcher", "job")},
        fault_schedule=((50, "exception"), (130, "exception")),
    ).validate()  # fmt: skip
    write_events(simulate(run, record=True), tmp_path / "events.jsonl")
    return json.loads(json.dumps(build_report(tmp_path)[0]))


def test_for_report_sizes_the_recommendation_for_the_configured_cluster(tmp_path: Path) -> None:
    report = simulated_report(tmp_path)
    rec = for_report(report, load_config(REPO / "project.yaml", env="prod"), trials=5, points=4)
    assert (rec["nodes"], rec["gpus_per_node"], rec["steps"], rec["configured_interval_steps"]) == (8, 8, 5000, 500)
    assert rec["node_mtbf_hours"] == pytest.approx(LLAMA3_NODE_MTBF_HOURS) and "Llama 3" in rec["node_mtbf_source"]
    assert rec["from_run"] == {"step_s": pytest.approx(0.5), "stall_s": pytest.approx(1.0),
                               "write_s": pytest.approx(30.0), "checkpoint_mode": "async"}  # fmt: skip
    assert rec["interval_steps"] >= 60  # 30 s of write / 0.5 s steps: no shorter interval avoids back-pressure
    assert rec["training_goodput_mean"] == max(m["training_goodput_mean"] for m in rec["by_mode"].values())


def test_for_report_takes_a_configured_mtbf_per_node(tmp_path: Path) -> None:
    cfg = config_from_dict({"observability": {"node_mtbf_hours": 1.0}, "train": {"steps": 20000}})  # 2 nodes
    rec = for_report(simulated_report(tmp_path), cfg, trials=5, points=4)
    assert rec["node_mtbf_hours"] == 1.0 and rec["cluster_mtbf_hours"] == pytest.approx(0.5)
    # the run measured 3 s + 2 s in-process recoveries; ft_launcher and a new pod keep their published defaults
    goodput = {m: v["training_goodput_mean"] for m, v in rec["by_mode"].items()}
    assert goodput["inprocess"] >= goodput["ft-launcher"] > goodput["async-ckpt"] > goodput["k8s-only"]
    assert goodput["k8s-only"] == goodput["sync-ckpt"]  # synchronous saves stall for the 30 s write
    assert rec["mode"] in ("inprocess", "inprocess-ft")
