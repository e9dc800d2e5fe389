"""A write slower than every watchdog of a rank (slow storage, injected): the waits on it keep the ranks alive.

A large model's write outlasts its last step by minutes (Llama 3.1 8B on the `prod` FSx: about 100 s), longer than
NVRx's hang timeouts and ft_launcher's heartbeat timeout; waiting on it without a sign of life got healthy ranks
killed at the end of every run, then restarted until their restarts ran out (2026-12-04, all three NVRx modes).
A write that outlasts even the checkpoint section is the rank's own error (exit 21), and the error path's wait still
commits it (2026-12-04: SIGKILLed with no cause recorded, and the write lost).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.helpers.training_runs import FAST_CONFIG, child_env, local_run
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


#: One save (step 8, the last: the interval is past the run) in a checkpoint section of 10 s: the rank waits on the
#: write for 8 s (:func:`~training.resilience.timeout_check.checkpoint_wait_s`), ft_launcher would kill it at 10 s;
#: the error path waits 8 s more, and the 12 s write ends about 4 s before that.
SECTIONS_S = {"setup": 60.0, "step": 15.0, "checkpoint": 10.0}


@pytest.mark.parametrize(("mode", "layer"), [("inprocess-ft", "inprocess"), ("ft-launcher", "ft_launcher")])
def test_a_write_past_the_checkpoint_section_is_a_storage_fault_whose_write_still_commits(tmp_path, mode, layer):
    """A 12 s write: at 8 s every rank gives up waiting (``checkpoint_write``, exit 21 where the worker exits) and
    ends the section; the error path's wait, kept alive, lets the write finish and rank 0 commit it; the layer of
    the mode restarts the ranks, which restore step 8 from storage and finish. Before: SIGKILLed mid-wait by the
    section timeout (or the in-process hard timeout) with no cause recorded, the write lost, the work redone."""
    config = copy.deepcopy(FAST_CONFIG)
    config["checkpoint"]["interval_steps"] = 10
    config["local"] = {"ft": {"section_timeouts_s": SECTIONS_S}}
    run_dir = tmp_path / "run"
    proc = local_run(run_dir, steps=8, mode=mode, config=config, env=child_env(TRAINING_CKPT_WRITE_DELAY_S="12"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["restarts_by_layer"] == {"inprocess": 0, "ft_launcher": 0, "job": 0} | {layer: 1}
    events = read_events(run_dir)
    assert [e["step"] for e in events if e["event"] == "ckpt_committed"] == [8]
    assert [(e["layer"], e["cause"]) for e in events if e["event"] == "restart_begin"] == [
        (layer, "checkpoint_write")
    ] * 2
    assert {(e["from_step"], e["tier"]) for e in events if e["event"] == "restore" and e["from_step"]} == {
        (8, "storage")
    }
    assert "the save of step 8 did not finish within 8 s" in (run_dir / "launcher.log").read_text()
