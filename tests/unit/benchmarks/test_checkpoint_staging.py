"""Splitting a run's step times into "a background write is in flight" and "idle"."""

from __future__ import annotations

import pytest

from benchmarks.checkpoint_staging import step_time_split


def _steps(rank: int, times: list[float], first: int = 1) -> list[dict[str, object]]:
    return [{"event": "step", "ts": t, "step": first + i, "rank": rank} for i, t in enumerate(times)]


def test_steps_overlapping_a_write_window_count_as_writing_and_the_stall_step_is_left_out() -> None:
    # rank 0: steps 1..8; save begins between steps 3 and 4 (stall), staged at 3.5, committed at 5.5
    events = _steps(0, [0.0, 1.0, 2.0, 3.6, 4.6, 5.8, 6.8, 7.8])
    events += [
        {"event": "ckpt_begin", "ts": 2.5, "step": 3, "rank": 0},
        {"event": "ckpt_staged", "ts": 3.5, "step": 3, "rank": 0},
        {"event": "ckpt_committed", "ts": 5.5, "step": 3, "rank": 0},
    ]
    events += _steps(1, [0.0, 9.0, 18.0])  # other ranks are ignored
    split = step_time_split(sorted(events, key=lambda e: e["ts"]), warmup=1)
    # gaps after warm-up: 2->3 idle 1.0, 3->4 stall (left out), 4->5 writing 1.0, 5->6 writing 1.2, 6->7, 7->8 idle
    assert split["steps_writing"] == 2 and split["step_s_writing"] == pytest.approx(1.1)
    assert split["steps_idle"] == 3 and split["step_s_idle"] == pytest.approx(1.0)


def test_no_saves_means_every_step_is_idle_and_restarts_break_gaps() -> None:
    events = _steps(0, [0.0, 1.0, 2.0]) + _steps(0, [10.0, 11.0], first=2)  # a restart replays step 2
    split = step_time_split(events, warmup=0)
    assert split["step_s_writing"] is None and split["steps_writing"] == 0
    assert split["steps_idle"] == 3 and split["step_s_idle"] == pytest.approx(1.0)
