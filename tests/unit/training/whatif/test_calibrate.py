"""Calibration from a report.json: a round trip through the report of a simulated run, and a real GPU report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.telemetry.report import build_report
from training.whatif.calibrate import calibrate, load_report
from training.whatif.engine import simulate
from training.whatif.outputs import write_events
from training.whatif.params import Dist, FaultClass, LayerParams, Scenario, ScenarioError

REPO = Path(__file__).resolve().parents[4]
EXC = FaultClass("exception", {"inprocess": 0.0, "ft_launcher": 0.0, "job": 0.0})
HANG = FaultClass("hang", {"inprocess": 7.0, "ft_launcher": 30.0, "job": 600.0})


def test_round_trip_through_the_report_of_a_simulated_run(tmp_path: Path) -> None:
    layers = {
        "inprocess": LayerParams(Dist(3.0)),
        "ft_launcher": LayerParams(Dist(8.0)),
        "job": LayerParams(Dist(10.0)),
    }
    truth = Scenario(
        steps=300, step_s=0.5, interval=20, stall_s=1.0, write_s=30.0, restore_s=Dist(2.0), mode="inprocess",
        fault_classes=(EXC, HANG), layers=layers,
        fault_schedule=((50, "exception"), (130, "hang"), (210, "exception")),
    ).validate()  # fmt: skip
    write_events(simulate(truth, record=True), tmp_path / "events.jsonl")
    report, _ = build_report(tmp_path)
    cal = calibrate(json.loads(json.dumps(report)), Scenario())
    ov = cal.overrides
    assert (ov["steps"], ov["interval"], ov["checkpoint_mode"]) == (300, 20, "async")
    assert ov["step_s"] == pytest.approx(0.5)
    # the report's write_s runs from ckpt_begin to the commit: 1 s stall + 30 s write
    assert (ov["stall_s"], ov["write_s"]) == pytest.approx((1.0, 30.0))
    # restart + restore per in-process fault: 3 + 2 s (the report does not time the restore on its own)
    restart = ov["layers"]["inprocess"].restart
    assert (restart.p50, restart.p95) == pytest.approx((5.0, 5.0))
    assert ov["restore_s"] == Dist(0.0)
    by_name = {c.name: c for c in ov["fault_classes"]}
    assert by_name["hang"].detection_s["inprocess"] == pytest.approx(7.0)  # measured
    assert by_name["hang"].detection_s["job"] == 600.0  # not measured: the default stays
    assert {c.name: c.share for c in cal.observed_classes} == {"exception": pytest.approx(2 / 3), "hang": 1 / 3}
    assert cal.measured_mtbf_s == pytest.approx(report["wall_seconds"] / 3)


def test_a_real_gpu_smoke_report() -> None:
    """tests/golden/gpu/smoke-2xh200.report.json (2 x H200): values computed by hand from the file."""
    cal = calibrate(load_report(REPO / "tests/golden/gpu/smoke-2xh200.report.json"), Scenario())
    ov = cal.overrides
    assert ov["step_s"] == 0.0266 and ov["interval"] == 25 and ov["stall_s"] == 4.1991
    assert ov["write_s"] == 0.0  # that old report's write_s p50 (3.28 s) is below its stall p50 (4.20 s)
    # ft_launcher: recovery - detection - step = 1.7328, 1.8217, 1.7537 -> p50 1.7537
    assert ov["layers"]["ft_launcher"].restart.p50 == pytest.approx(29.5801 - 27.7998 - 0.0266)  # the oom fault
    assert ov["layers"]["inprocess"].restart.p50 == pytest.approx(17.2739 - 16.5348 - 0.0266)
    observed = {c.name: c for c in cal.observed_classes}
    # exception, comm, oom -> exception (3), hang (1), sigkill -> process_crash (1, never recovered in that run)
    assert {k: c.share for k, c in observed.items()} == {"exception": 0.6, "hang": 0.2, "process_crash": 0.2}
    assert observed["exception"].detection_s["ft_launcher"] == pytest.approx(27.7998)  # median of 29.17, 27.02, 27.80
    assert observed["hang"].detection_s["inprocess"] == pytest.approx(16.5348)
    assert cal.measured_mtbf_s == pytest.approx(148.0676 / 5)


def test_apply_keeps_the_fault_rate_unless_asked(tmp_path: Path) -> None:
    cal = calibrate(load_report(REPO / "tests/golden/gpu/smoke-2xh200.report.json"), Scenario())
    sc = cal.apply(Scenario(nodes=64)).validate()
    assert sc.node_mtbf_hours is None and [c.name for c in sc.fault_classes] == [
        "exception",
        "hang",
        "gpu_fault",
        "node_loss",
    ]
    with_faults = cal.apply(Scenario(nodes=64), faults=True, report_nodes=2).validate()
    assert with_faults.node_mtbf_hours == pytest.approx(148.0676 / 5 * 2 / 3600)  # the run's MTBF x its 2 nodes
    assert [c.name for c in with_faults.fault_classes] == ["exception", "hang", "process_crash"]


def test_not_a_report(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"rows": []}')
    with pytest.raises(ScenarioError, match=r"--from-report: .* is not a report\.json .*missing final_step"):
        load_report(tmp_path / "results.json")
    with pytest.raises(ScenarioError, match=r"--from-report: .* does not exist"):
        load_report(tmp_path / "nope.json")


def test_a_lost_nodes_job_restart_leaves_out_the_start_up_the_simulation_adds() -> None:
    """The issue-13 cluster run's report (2 pods x 2 workers, /tmp/i13/faulted): its two node losses, by hand.
    Node loss 1: recovery 21.41, detection 6.54; node loss 2: 17.65, 16.80; step 0.0969 s; launch -> first start
    10.32 s, which the simulation adds after every job-layer restart: 21.41 - 6.54 - 0.0969 - 10.32 = 4.4531 and
    17.65 - 16.80 - 0.0969 - 10.32 < 0 -> 0."""
    report = {
        "final_step": 140, "wall_seconds": 73.0, "productive_seconds": 14.0, "advice": {},
        "checkpoint": {"step_s_without_checkpoints": 0.0969, "mode": "async"},
        "faults": [
            {"kind": "node-loss", "layer": "job", "step": 41, "injected": True, "recovery_s": 21.41,
             "detection_s": 6.54},
            {"kind": "node-loss", "layer": "job", "step": 101, "injected": True, "recovery_s": 17.65,
             "detection_s": 16.80},
        ],
    }  # fmt: skip
    cal = calibrate(report, Scenario(startup_s=10.32))
    restart = cal.overrides["layers"]["job"].restart
    assert restart.p50 == pytest.approx((4.4531 + 0.0) / 2) and restart.p95 == pytest.approx(0.95 * 4.4531)
    (loss,) = cal.observed_classes
    assert loss.name == "node_loss" and loss.detection_s["job"] == pytest.approx((6.54 + 16.80) / 2)
