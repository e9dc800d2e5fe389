"""Hang detection: the derived step budget, and NVRx's soft timeout driven by the step pings (real NVRx, a real
Wrapper in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from platform_config import load_config
from platform_config.schema import InprocessConfig
from tests.helpers.training_runs import REPO_ROOT, free_port
from tests.helpers.training_runs import test_env as child_env
from training.resilience.hang import MIN_SAMPLES, step_budget


@pytest.mark.parametrize(
    ("gaps", "expected"),
    [
        ([0.1] * (MIN_SAMPLES - 1), 20.0),  # too few steps measured: the ceiling
        ([0.1] * MIN_SAMPLES, 3.0),  # 10 x 0.1 s is below the floor
        ([0.1, 0.2, 0.5, 0.1, 0.1], 5.0),  # the slowest step counts
        ([2.5] * MIN_SAMPLES, 20.0),  # 25 s: capped by the configured soft timeout
    ],
)
def test_the_step_budget_is_the_slowest_step_times_the_factor_within_floor_and_ceiling(gaps, expected) -> None:
    assert step_budget(gaps, factor=10.0, floor_s=3.0, ceiling_s=20.0) == pytest.approx(expected)


def test_intervals_that_would_starve_the_monitor_process_are_refused() -> None:
    with pytest.raises(ValueError, match="at most half of progress_watchdog_interval_s"):
        InprocessConfig(monitor_process_interval_s=1.0, progress_watchdog_interval_s=1.0)
    with pytest.raises(ValueError, match="step_timeout_floor_s"):
        InprocessConfig(step_timeout_floor_s=25.0)
    ip = load_config().inprocess
    assert ip.monitor_process_interval_s * 2 <= ip.progress_watchdog_interval_s


def test_step_pings_fire_nvrx_soft_timeout_on_a_python_hang_but_not_on_a_long_checkpoint(tmp_path: Path) -> None:
    env = child_env(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    env.pop("LOCAL_RANK", None)
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tests/helpers/nvrx_step_pings.py"), str(free_port()), str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = json.loads(lines[-1])
    ip = load_config().local.inprocess
    # One restart, and it came from the hang: the checkpoint phase, longer than the step budget, kept the ceiling.
    assert out["iterations"] == [0, 1] and out["result"] == 1
    assert out["interrupted_in"] == "hang"
    assert "SOFT_TIMEOUT" in out["interruption"]
    # 20 ms steps x factor 1 is below the floor: the step budget is the floor, the hard timeout moves with it.
    floor = ip.step_timeout_floor_s
    assert out["hang_timeouts"][0] == {"soft_s": floor, "hard_s": floor + ip.hard_timeout_s - ip.soft_timeout_s}
