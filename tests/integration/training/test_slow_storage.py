"""A write slower than every watchdog of a rank (slow storage, injected): the waits on it keep the ranks alive.

A large model's write outlasts its last step by minutes (Llama 3.1 8B on the `prod` FSx: about 100 s), longer than
NVRx's hang timeouts and ft_launcher's heartbeat timeout; waiting on it without a sign of life got healthy ranks
killed at the end of every run, then restarted until their restarts ran out (session 25, all three NVRx modes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.training_runs import child_env, local_run
from training.telemetry.events import read_events

pytestmark = pytest.mark.integration


def test_writes_slower_than_the_hang_timeouts_finish_the_run_without_a_restart(tmp_path: Path) -> None:
    """Default mode (ft_launcher + in-process), 8 steps, a checkpoint every 5, each write 10 s (the local in-process
    timeouts: soft 4 s, hard 8 s): the final save waits for step 5's write (back-pressure), then the run waits for
    step 8's; both commit, nothing restarts."""
    run_dir = tmp_path / "run"
    proc = local_run(run_dir, steps=8, env=child_env(TRAINING_CKPT_WRITE_DELAY_S="10"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["restarts_by_layer"] == {"inprocess": 0, "ft_launcher": 0, "job": 0}
    events = read_events(run_dir)
    assert [e["step"] for e in events if e["event"] == "ckpt_committed"] == [5, 8]
    assert not [e for e in events if e["event"] in ("restart_begin", "ckpt_failed")]
