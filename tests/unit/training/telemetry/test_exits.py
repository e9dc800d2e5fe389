"""Launcher log lines -> why a worker died without an event."""

from __future__ import annotations

from pathlib import Path

from training.telemetry.exits import WorkerExit, find_exit, parse_launcher_log, read_worker_exits

#: Lines as ft_launcher (NVRx 0.4.1) and torchrun wrote them in this project's runs.
FT_LINE = (
    "[2026-11-30 20:41:33,569] [ERROR] [ft_launcher19378@vm] failed (exitcode: -9) local_rank: 1 (pid: 19389) "
    "of binary: /work/main/.venv/bin/python"
)
TORCHRUN_SUMMARY = "  exitcode  : -11 (pid: 4242)"


def test_ft_launcher_and_torchrun_lines() -> None:
    text = f"== attempt 0\n{FT_LINE}\nnoise (pid: 1)\n{TORCHRUN_SUMMARY}\n"
    ft, summary = parse_launcher_log(text)
    assert (ft.pid, ft.code, ft.host, ft.cause) == (19389, -9, "vm", "sigkill")
    assert ft.source == f"launcher.log:2: {FT_LINE}"
    assert (summary.pid, summary.code, summary.host, summary.cause) == (4242, -11, None, "sigsegv")


def test_exit_codes_name_signals_the_shell_way_too() -> None:
    assert WorkerExit(1, 137, None, "").cause == "sigkill"  # bash: 128 + 9
    assert WorkerExit(1, 14, None, "").cause == "exit_14"
    assert WorkerExit(1, -99, None, "").cause == "signal_99"


def test_run_dir_logs_and_host_matching(tmp_path: Path) -> None:
    (tmp_path / "pods").mkdir()
    (tmp_path / "launcher.log").write_text(FT_LINE + "\n")
    other = FT_LINE.replace("ft_launcher19378@vm", "ft_launcher7@fsdp-train-1").replace("19389", "77")
    (tmp_path / "pods" / "fsdp-train-1-abc.log").write_text(other + "\n")
    exits = read_worker_exits(tmp_path)
    assert [(x.pid, x.host, x.source.split(":")[0]) for x in exits] == [
        (19389, "vm", "launcher.log"),
        (77, "fsdp-train-1", "pods/fsdp-train-1-abc.log"),
    ]
    assert find_exit(exits, 77, "fsdp-train-1") is exits[1]
    assert find_exit(exits, 77, "fsdp-train-0") is None  # the same pid in another pod's namespace
    assert find_exit(exits, None, "vm") is None
    assert read_worker_exits(tmp_path / "nothing") == []
