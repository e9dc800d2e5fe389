"""The launcher flag list the image checks: derived from charts/launch_command.py, and the committed file is current."""

from __future__ import annotations

from charts.launch_command import launch_argv, launcher_args
from charts.launcher_flags import FLAGS_FILE, collect_flags, flags_of, main, mode_flags, project_configs, render
from charts.topology import Topology
from platform_config import RecoveryMode
from tests.unit.charts.conftest import make_cfg


def test_committed_file_is_up_to_date() -> None:
    assert FLAGS_FILE.read_text() == render(collect_flags(project_configs())), "run python -m charts.launcher_flags"
    assert main(["--check"]) == 0


def test_every_flag_of_every_mode_is_listed(cfg) -> None:
    listed = collect_flags([cfg])
    for mode in RecoveryMode:
        args = launcher_args(cfg, mode, Topology.from_config(cfg))
        assert set(flags_of(args[1:])) <= set(listed[args[0]]), mode
    assert set(listed) == {"ft_launcher", "torchrun"}


def test_the_worker_prefix_flag_is_kept_and_training_args_are_not(cfg) -> None:
    launcher, flags = mode_flags(cfg, RecoveryMode.INPROCESS_FT)
    assert launcher == "ft_launcher" and "--no-python" in flags
    argv = launch_argv(cfg, RecoveryMode.INPROCESS_FT, Topology.from_config(cfg))
    assert "--config" in argv and "--run-dir" in argv  # the trainer's own options, not the launcher's
    assert not {"--config", "--run-dir", "--mode", "--faults"} & flags


def test_flags_follow_the_configuration() -> None:
    old = collect_flags([make_cfg(image={"nvrx_version": "0.6.0"})])["ft_launcher"]
    new = collect_flags([make_cfg()])["ft_launcher"]
    assert "--ft-no-restart-exit-code" not in old and "--ft-no-restart-exit-code" in new


def test_flags_of_strips_inline_values() -> None:
    assert flags_of(["--a", "1", "--b=2", "x", "-c"]) == ["--a", "--b"]


def test_check_mode_reports_a_stale_file(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / "launcher-flags.txt"
    stale.write_text("torchrun --nnodes\n")
    monkeypatch.setattr("charts.launcher_flags.FLAGS_FILE", stale)
    assert main(["--check"]) == 1
    assert "is out of date" in capsys.readouterr().err
