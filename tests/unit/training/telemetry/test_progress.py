"""The live progress lines of a run (``training.telemetry.progress``) from hand-made events, and the reader that
follows a real ``events.jsonl`` while it is written."""

from __future__ import annotations

import json
from pathlib import Path

from training.telemetry.progress import EventTail, describe


def test_a_step_line_every_n_steps_and_at_the_target() -> None:
    assert describe({"event": "step", "step": 20, "loss": 2.5}, every=20, target=70) == "step    20/70  loss 2.5000"
    assert describe({"event": "step", "step": 21, "loss": 2.5}, every=20, target=70) is None
    assert describe({"event": "step", "step": 70, "loss": 1.25}, every=20, target=70) == "step    70/70  loss 1.2500"


def test_a_fault_line_names_its_rank_or_pod_and_its_phase() -> None:
    """``make demo`` printed ``at step of step 55`` for a fault in the step phase."""
    step = {"event": "fault_injected", "kind": "exception", "step": 55, "phase": "step", "fault_rank": 2}
    assert describe(step, 20, 80) == "FAULT  exception injected on rank 2 at step 55"
    ckpt = {**step, "kind": "sigkill", "step": 10, "phase": "checkpoint", "fault_rank": 0}
    assert describe(ckpt, 20, 80) == "FAULT  sigkill injected on rank 0 at checkpoint of step 10"
    node = {"event": "fault_injected", "kind": "node-loss", "step": 26, "phase": "step", "rank": -1, "pod": 1}
    assert describe(node, 20, 80) == "FAULT  node-loss injected on pod 1 at step 26"
    assert describe({k: v for k, v in step.items() if k != "phase"}, 20, 80).endswith(" at step 55")


def test_restarts_by_rank_0_and_failed_exits_only() -> None:
    begin = {"event": "restart_begin", "rank": 0, "layer": "job", "cause": "node-loss"}
    assert describe(begin, 20, 80) == "RESTART begin: layer job, cause node-loss"
    assert describe({**begin, "rank": 1}, 20, 80) is None
    end = {"event": "restart_end", "rank": 0, "layer": "inprocess", "resumed_step": 50}
    assert describe(end, 20, 80) == "RESTART end:   layer inprocess, resumed from step 50"
    gone = {"event": "exit", "rank": 1, "code": 14, "reason": "peer_lost"}
    assert describe(gone, 20, 80) == "rank 1 exited with code 14 (peer_lost)"
    assert describe({**gone, "code": 0, "reason": "done"}, 20, 80) is None


def test_a_restore_line_names_the_tier_and_a_fresh_start_says_so() -> None:
    """A fresh start printed ``restored checkpoint of step 0 (none)``: nothing had been restored."""
    restore = {"event": "restore", "from_step": 35, "tier": "memory"}
    assert describe(restore, 20, 80) == "restored checkpoint of step 35 (memory)"
    fresh = {"event": "restore", "from_step": 0, "tier": "none", "reason": "no committed checkpoint"}
    assert describe(fresh, 20, 80) == "nothing to restore (no committed checkpoint): training starts at step 0"


def test_the_tail_returns_each_event_once_and_waits_for_a_torn_last_line(tmp_path: Path) -> None:
    tail = EventTail(tmp_path)
    assert tail.poll() == []  # no file yet
    first, second = {"event": "step", "step": 1}, {"event": "step", "step": 2}
    with open(tmp_path / "events.jsonl", "w") as f:
        f.write(json.dumps(first) + "\n" + json.dumps(second)[:7])  # the second line half written
    assert tail.poll() == [first]
    with open(tmp_path / "events.jsonl", "a") as f:
        f.write(json.dumps(second)[7:] + "\nnot json\n")
    assert tail.poll() == [second]  # the rest of the line; a line that is not JSON is skipped
    assert tail.poll() == [] and tail.max_step == 2
