"""The goodput report on a real local run (CPU workers under ft_launcher + in-process wrapper) with injected faults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.training_runs import free_port
from training.telemetry.events import LAYERS

REPO = Path(__file__).resolve().parents[3]
STEPS = 60
#: An exception before the first storage checkpoint (step 25) and a SIGKILL after it. The memory tier (a snapshot
#: every 5 steps, the default) brings both back to the snapshot before them: step 15 from this process' own memory
#: after the in-process restart, step 40 from /dev/shm after ft_launcher respawned the workers.
FAULTS = "exception@20:1,sigkill@45:1"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict, dict, str]:
    run_dir = tmp_path_factory.mktemp("report_run")
    cmd = [sys.executable, "-m", "training.local", "--run-dir", str(run_dir), "--steps", str(STEPS)]
    cmd += ["--faults", FAULTS, "--fresh", "--port", str(free_port()), "--store-port", str(free_port())]
    train = subprocess.run(
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert train.returncode == 0, f"training.local failed:\n{train.stdout[-3000:]}\n{train.stderr[-3000:]}"
    rep = subprocess.run(
        [sys.executable, "-m", "training.telemetry.report", str(run_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rep.returncode == 0, rep.stderr
    report = json.loads((run_dir / "report.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    return run_dir, report, summary, rep.stdout


def test_outputs_exist(run) -> None:
    run_dir, report, _, stdout = run
    assert (run_dir / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert (run_dir / "recovery_hist.png").read_bytes()[:4] == b"\x89PNG"
    assert "training goodput" in stdout and "Recovery time by layer" in stdout
    assert report["warnings"] == [], report["warnings"]


def test_progress_matches_the_run(run) -> None:
    _, report, summary, _ = run
    assert report["final_step"] == summary["final_step"] == STEPS
    assert report["steps"]["kept"] == STEPS
    assert report["steps"]["re_executed"] > 0  # rolled-back steps were computed again
    assert 0 < report["training_goodput"] <= report["infrastructure_goodput"] <= 1


def test_every_injected_fault_is_detected_recovered_and_rolled_back(run) -> None:
    _, report, summary, _ = run
    injected = [f for f in report["faults"] if f["injected"]]
    assert len(injected) == summary["faults_injected"] == 2
    for f in injected:
        assert f["layer"] in LAYERS
        assert 0 < f["detection_s"] <= f["recovery_s"]
        assert f["rollback_steps"] == f["step"] - f["restored_step"]
        assert 0 < f["rollback_s"] <= f["lost_work_s"]
    exc, kill = injected
    assert (exc["kind"], exc["step"], exc["rank"]) == ("exception", 20, 1)
    assert (exc["restored_step"], exc["restore_tier"]) == (15, "memory")  # no storage checkpoint yet: the snapshot
    assert (kill["kind"], kill["step"], kill["restored_step"], kill["restore_tier"]) == ("sigkill", 45, 40, "shm")
    assert kill["layer"] == "ft_launcher"  # a dead process is restarted by the launcher
    n = sum(v["n"] for v in report["recovery_s_by_layer"].values())
    assert n == len([f for f in report["faults"] if f["recovery_s"] is not None])


def test_restarts_agree_with_the_training_summary(run) -> None:
    _, report, summary, _ = run
    expected = {k: v for k, v in summary["restarts_by_layer"].items() if v}
    assert report["restarts"]["by_layer"] == expected


def test_checkpoints_and_advice(run) -> None:
    _, report, _, _ = run
    ck = report["checkpoint"]
    assert {25, 50} <= set(ck["committed_steps"])
    assert ck["stall_s_p50"] > 0 and ck["write_s_p50"] > 0
    assert 0 < ck["efficiency"] <= 1.5  # a ratio of two noisy means on a shared CPU
    assert report["freshness"]["max_s"] > 0
    advice = report["advice"]
    assert advice["interval_s"] > 0 and advice["interval_steps"] >= 1, advice
