"""The launcher flag list the image checks: derived from charts/launch_command.py, and the committed file is current."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from charts.image import IMAGE_ENV_VAR
from charts.launch_command import launch_argv, launcher_args
from charts.launcher_flags import FLAGS_FILE, collect_flags, flags_of, main, mode_flags, project_configs, render
from charts.main import build_app
from charts.topology import Topology
from platform_config import RecoveryMode
from tests.unit.charts.conftest import IMAGE, make_cfg

#: The supervisor's launcher line: ``  python -m <the launcher's module> --nnodes ... --no-python bash -c '<worker>'
#: trainer ... &``, or with the worker template ``  python -m training.launch.prefork run <the launcher's module> ...``.
#: The launcher a module stands for.
_BY_MODULE = {"training.resilience.ft_launcher": "ft_launcher", "torch.distributed.run": "torchrun"}
_LAUNCHER_LINE = re.compile(
    r"^[ \t]*python -m (training\.launch\.prefork run )?(" + "|".join(re.escape(m) for m in _BY_MODULE) + ") ",
    re.MULTILINE,
)


def manifest_launcher_flags(dist: Path) -> dict[str, set[str]]:
    """launcher -> the ``--`` options it is started with, read back from the training Jobs' container scripts in
    ``dist`` (shell-parsed, independently of :func:`charts.launcher_flags.mode_flags`): every token before the worker
    program ``bash`` of the one launcher line of each script."""
    found: dict[str, set[str]] = {}
    for path in sorted(dist.glob("train-*.k8s.yaml")):
        (job,) = [d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == "Job"]
        (container,) = job["spec"]["template"]["spec"]["containers"]
        shell, option, script = container["command"]
        assert (shell, option) == ("bash", "-c"), path.name
        (line,) = list(_LAUNCHER_LINE.finditer(script))
        lexer = shlex.shlex(script[line.start() :], posix=True)
        lexer.whitespace_split = True
        tokens = list(iter(lexer.get_token, "&"))
        head = tokens[: tokens.index("bash")]
        head = head[4:] if head[:4] == ["python", "-m", "training.launch.prefork", "run"] else head[2:]
        head = [_BY_MODULE[head[0]], *head[1:]]
        launcher, *args = head
        found.setdefault(launcher, set()).update(a for a in args if a.startswith("--"))
    return found


def committed_flags() -> dict[str, set[str]]:
    """``image/launcher-flags.txt`` as launcher -> flags (what the image build and preflight check)."""
    out: dict[str, set[str]] = {}
    for line in FLAGS_FILE.read_text().splitlines():
        if line and not line.startswith("#"):
            launcher, flag = line.split()
            out.setdefault(launcher, set()).add(flag)
    return out


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


def test_committed_file_equals_the_flags_in_the_synthesized_manifests(tmp_path) -> None:
    """What the training Jobs of every environment really start their launchers with is exactly the committed list:
    a flag added to the charts outside launch_argv, or a stale file, fails here."""
    in_manifests: dict[str, set[str]] = {}
    for index, cfg in enumerate(project_configs()):
        out = tmp_path / str(index)
        build_app(cfg, str(out), environ={IMAGE_ENV_VAR: IMAGE}).synth()
        assert len(list(out.glob("train-*.k8s.yaml"))) == len(RecoveryMode)
        for launcher, flags in manifest_launcher_flags(out).items():
            in_manifests.setdefault(launcher, set()).update(flags)
    assert in_manifests == committed_flags()
    assert {"--ft-no-restart-exit-code", "--ft-rank-section-timeouts", "--no-python"} <= in_manifests["ft_launcher"]
    assert in_manifests["torchrun"] == {
        "--max-restarts",
        "--nnodes",
        "--no-python",
        "--nproc-per-node",
        "--rdzv-backend",
        "--rdzv-conf",
        "--rdzv-endpoint",
        "--rdzv-id",
    }
