"""Splitting a run's step times into "a background write is in flight" and "idle"; the disk-space check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.checkpoint_staging import free_space_error, main, space_needed, step_time_split
from tests.helpers.training_runs import small_tmpfs


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


def test_the_step_time_series_is_the_mean_of_each_block_of_25_steps() -> None:
    # steps 1..60, 1 s apart except 3 s from step 30 to 31: blocks 0 (steps 2-24), 1 (25-49: one 3 s gap), 2 (50-60)
    times = [float(i) + (2.0 if i >= 30 else 0.0) for i in range(60)]
    split = step_time_split(_steps(0, times), warmup=0)
    assert split["step_s_blocks"] == [1.0, pytest.approx(1.08), 1.0]


def test_no_saves_means_every_step_is_idle_and_restarts_break_gaps() -> None:
    events = _steps(0, [0.0, 1.0, 2.0]) + _steps(0, [10.0, 11.0], first=2)  # a restart replays step 2
    split = step_time_split(events, warmup=0)
    assert split["step_s_writing"] is None and split["steps_writing"] == 0
    assert split["steps_idle"] == 3 and split["step_s_idle"] == pytest.approx(1.0)


def test_one_variant_of_the_1b_model_needs_four_checkpoints_of_11_7_gb() -> None:
    # 974,227,456 parameters x 12 bytes = 11.69 GB per checkpoint (measured: 11.7 GB on 1 x H200), keep_last 3 + 1
    assert space_needed("1b", keep_last=3) == 46_762_917_888


def test_free_space_is_checked_on_the_output_file_system(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    assert free_space_error(tmp_path, 1) is None
    message = free_space_error(tmp_path, free + 10**9)
    assert message is not None and message.startswith(f"{tmp_path} has ")
    assert "one variant's checkpoints need about" in message and "pass --out on a larger file system" in message


def test_the_benchmark_refuses_to_start_without_room(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with small_tmpfs(tmp_path / "small", "64k") as out:
        assert main(["--variants", "sync", "--out", str(out)]) == 1
        assert not list(out.iterdir())  # nothing launched
    err = capsys.readouterr().err
    assert f"{out} has 64 KiB free, one variant's checkpoints need about 5.8 MiB" in err
