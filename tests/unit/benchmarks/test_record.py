"""The benchmark record: figures from hand-written rank-0 event logs, merged per machine, keys never guessed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.record import KEYS, checkpoint_figures, main


def _ckpt_dir(tmp_path: Path) -> Path:
    """An ``async`` variant of 2 ranks: three saves of 11 GB (5.5 GB per rank), and its results.json."""
    d = tmp_path / "ckpt"
    (d / "async").mkdir(parents=True)
    events = [
        {"ts": 1.0, "rank": 1, "event": "ckpt_staged", "step": 300, "stall_s": 9.0},  # rank 1's: ignored
        *(
            {"ts": 10.0 * i + 1, "rank": 0, "event": "ckpt_staged", "step": 300 * i, "stall_s": stall}
            for i, stall in ((1, 5.6), (2, 0.3), (3, 0.5))
        ),
        *(
            {"ts": 10.0 * i + 5, "rank": 0, "event": "ckpt_committed", "step": 300 * i, "write_s": w, "bytes": 11e9}
            for i, w in ((1, 20.0), (2, 22.0), (3, 19.0))
        ),
    ]
    (d / "async" / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    rows = {"none": {"efficiency_vs_none": 1.0}, "async": {"efficiency_vs_none": 0.966}}
    results = {"device": "2 x NVIDIA H200", "world_size": 2, "results": rows}
    (d / "results.json").write_text(json.dumps(results))
    return d


def test_checkpoint_figures_from_rank_0s_events(tmp_path: Path) -> None:
    figures = checkpoint_figures(_ckpt_dir(tmp_path))
    assert figures == {
        "async_ckpt_efficiency": 0.966,
        "ckpt_stall_s_first": 5.6,
        "ckpt_stall_s_p50": 0.5,  # median of 5.6, 0.3, 0.5
        "ckpt_stall_floor_s": pytest.approx(0.1),  # 5.5 GB per rank / 55 GB/s
        "ckpt_commit_s_p50": 20.0,
    }


def test_the_record_merges_per_machine_and_leaves_unmeasured_keys_null(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.json"
    out.write_text(json.dumps({"cpu": {"hang_recovery_s": 4.0}}))
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"launch_to_first_step_s": 7.5}))
    args = ["--machine", "h200x2", "--ckpt-dir", str(_ckpt_dir(tmp_path)), "--extra", str(extra), "--out", str(out)]
    assert main(args) == 0
    record = json.loads(out.read_text())
    assert record["cpu"] == {"hang_recovery_s": 4.0}  # another machine's entry is kept
    entry = record["h200x2"]
    assert entry["device"] == "2 x NVIDIA H200" and entry["async_ckpt_efficiency_1b_300"] == 0.966
    assert entry["launch_to_first_step_s"] == 7.5
    assert [k for k in KEYS if entry[k] is None] == [
        "async_ckpt_efficiency_1b_100",  # the 100-step interval's figures come through --extra
        "ckpt_commit_s_p50_1b_100",
        "inprocess_recovery_s_p50",
        "hang_recovery_s",
        "ft_launcher_recovery_s_p50",
        "rollback_steps_p50_memory_tier",
        "rollback_steps_p50_storage_only",
        "async_mem_efficiency_1b_100",  # the scale keys come from --scale-ckpt-dir and --scale-run-dir
        "mem_snapshot_stall_s_p50_1b",
        "memory_restore_s_1b",
        "inprocess_recovery_s_p50_1b",
        "hang_recovery_s_1b",
        "ft_launcher_recovery_s_1b",
    ]


def test_an_unknown_extra_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"hang_recovery_seconds": 4.0}))
    with pytest.raises(SystemExit) as exc:
        main(["--machine", "cpu", "--extra", str(extra), "--out", str(tmp_path / "b.json")])
    assert exc.value.code == 2
    assert '(got ["hang_recovery_seconds"])' in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()


def test_launch_to_first_step_from_the_startup_benchmarks_total_row(tmp_path: Path) -> None:
    rows = [
        {"phase": "launcher", "first_start_s": 1.25, "inprocess_restart_s": None},
        {"phase": "total", "first_start_s": 9.5, "inprocess_restart_s": 2.0},
    ]
    (tmp_path / "startup").mkdir()
    (tmp_path / "startup" / "results.json").write_text(json.dumps({"device": "cpu", "rows": rows}))
    out = tmp_path / "b.json"
    assert main(["--machine", "cpu", "--startup-dir", str(tmp_path / "startup"), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["cpu"]["launch_to_first_step_s"] == 9.5


def test_an_update_keeps_the_earlier_figures_and_says_where_they_come_from(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.json"
    earlier = {
        **{"commit": "aaa", "date": "2026-11-30", "device": "1 x H200", "hang_recovery_s": 3.8},
        **{"ckpt_commit_s_p50": 29.6, "launch_to_first_step_s": 11.5},
        "carried": {"ckpt_commit_s_p50": "zzz 2026-11-01"},
    }
    out.write_text(json.dumps({"h200x1": earlier}))
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"launch_to_first_step_s": 8.0}))
    assert main(["--machine", "h200x1", "--extra", str(extra), "--update", "--commit", "bbb", "--out", str(out)]) == 0
    entry = json.loads(out.read_text())["h200x1"]
    assert (entry["commit"], entry["device"]) == ("bbb", "1 x H200")
    assert (entry["launch_to_first_step_s"], entry["hang_recovery_s"], entry["ckpt_commit_s_p50"]) == (8.0, 3.8, 29.6)
    assert entry["carried"] == {"hang_recovery_s": "aaa 2026-11-30", "ckpt_commit_s_p50": "zzz 2026-11-01"}
    assert entry["inprocess_recovery_s_p50"] is None  # measured nowhere


def test_the_scale_benchmark_s_keys_come_from_its_async_mem_variant(tmp_path: Path) -> None:
    from benchmarks.record import scale_checkpoint_figures

    results = {
        "none": {"efficiency_vs_none": 1.0, "mem_stall_s_p50": None},
        "async+mem": {"efficiency_vs_none": 0.875, "mem_stall_s_p50": 0.0197},
    }
    (tmp_path / "results.json").write_text(json.dumps({"device": "1 x H100", "world_size": 1, "results": results}))
    assert scale_checkpoint_figures(tmp_path) == {
        "async_mem_efficiency_1b_100": 0.875,
        "mem_snapshot_stall_s_p50_1b": 0.0197,
        "async_ckpt_efficiency_1b_100": None,  # no async variant in this run
    }
