"""``python -m training.local``: the demo CLI reaches its target, shows progress, fails loudly otherwise."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from platform_config import load_config
from tests.helpers.training_runs import FAST_CONFIG, REPO_ROOT, local_run
from tests.helpers.training_runs import test_env as child_env

pytestmark = pytest.mark.integration


def test_repeated_fault_escalates_to_unrecoverable_exit(tmp_path: Path) -> None:
    """A sticky fault (fires after every recovery) exceeds faults.max_repeats: exit with the unrecoverable code."""
    cfg = copy.deepcopy(FAST_CONFIG)
    cfg["faults"] = {"max_repeats": 1}
    proc = local_run(tmp_path / "sticky", config=cfg, steps=12, faults="exception@3:1!")
    assert proc.returncode == load_config().ft.unrecoverable_exit_code, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAILED" in proc.stderr and "target step 12 not reached" in proc.stderr
    assert "faults.max_repeats=1" in proc.stderr


def test_k8s_only_fault_exits_with_cause_code_and_pod_restart_recovers(tmp_path: Path) -> None:
    """k8s-only: the fault ends the launch with the cause's code; the emulated pod restart (JOB_ATTEMPT+1) resumes."""
    proc = local_run(tmp_path / "k8s", steps=12, faults="exception@7:1", mode="k8s-only")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rank 1 exited with code 10 (exception)" in proc.stdout
    assert "JOB   pod restart (attempt 1)" in proc.stdout
    summary = json.loads((tmp_path / "k8s" / "summary.json").read_text())
    assert summary["restarts_by_layer"]["job"] == 1 and summary["final_step"] == 12


def test_bad_fault_spec_is_rejected() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "training.train", "--run-dir", "/tmp/unused-h4", "--faults", "explode@3"],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "kind must be one of" in proc.stderr
