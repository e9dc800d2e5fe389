"""``training.train --fresh`` under torchrun: it holds for the first launch of a run, not for its restarts."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.helpers.training_runs import FAST_CONFIG, torchrun
from training.checkpoint.files import step_dir_name
from training.resilience.exit_codes import EXIT_STATUS_FILE, ExitCode
from training.telemetry.events import read_events

pytestmark = pytest.mark.integration


def _launch(run_dir: Path, config: Path, *extra: str, mode: str = "sync-ckpt") -> None:
    args = ["training.train", "--config", config, "--run-dir", run_dir, "--mode", mode, "--steps", "5"]
    torchrun([*args, "--short-timeouts", *extra], module=True, check=False, timeout_s=240)


def _damage(run_dir: Path) -> None:
    """Remove a shard of the only checkpoint: the next restore quarantines it, and none is usable."""
    (run_dir / "checkpoints" / step_dir_name(5) / "__0_0.distcp").unlink()


def _steps(run_dir: Path) -> list[int]:
    return [e["step"] for e in read_events(run_dir) if e["event"] == "step"]


def test_fresh_holds_for_the_first_launch_only(tmp_path: Path) -> None:
    run_dir, config = tmp_path / "run", tmp_path / "project.yaml"
    config.write_text(yaml.safe_dump(copy.deepcopy(FAST_CONFIG)))
    _launch(run_dir, config)
    assert _steps(run_dir) == [1, 2, 3, 4, 5]
    _damage(run_dir)
    _launch(run_dir, config, "--fresh")  # the user starts over on purpose: allowed
    assert _steps(run_dir) == [1, 2, 3, 4, 5] * 2
    assert json.loads((run_dir / "fresh_start.json").read_text())["resumed_step"] == 0
    _damage(run_dir)
    # The same command again (a pod restart), now with the in-process layer on: no silent step 0, and no in-process
    # restart either (no restart can make a checkpoint usable): the worker ends at once with the Job-failing code.
    _launch(run_dir, config, "--fresh", mode="inprocess")
    assert _steps(run_dir) == [1, 2, 3, 4, 5] * 2
    status = json.loads((run_dir / EXIT_STATUS_FILE).read_text())
    assert (status["code"], status["cause"]) == (int(ExitCode.NO_USABLE_CHECKPOINT), "no_usable_checkpoint")
    restarts = [e for e in read_events(run_dir) if e["event"] == "restart_begin"]  # the first two launches had none
    assert restarts == [], restarts
