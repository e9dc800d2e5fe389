"""``python -m training.local``'s command line: every bad value, the fault schedule checked against the run it
describes, ends the command with status 2 and one message before anything starts (issue 51)."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from platform_config import ConfigError
from tests.helpers.training_runs import REPO_ROOT
from tests.helpers.training_runs import test_env as child_env
from training.cluster.node_timeline import EksTimeline
from training.local import CLUSTER_TIMEOUT_S, parse_args

#: The run the table's flags are checked against (the schema's defaults, spelled out: project.yaml may change).
CONFIG = {"local": {"steps": 160, "nproc": 2, "faults": "exception@40:1"}, "train": {"eval_interval": 50}}
KINDS = "kind must be one of exception, hang, sigkill, oom, comm"
HEAD = "error: invalid arguments (training.local):\n"
TIMELINE_KEYS = [f.name for f in fields(EksTimeline)]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "project.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return path


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The lines of the message ``parse_args(argv)`` ends with (status 2 asserted)."""
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(HEAD), err
    return [line.removeprefix("  - ") for line in err.removeprefix(HEAD).splitlines()]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # the three cases: an unknown kind, a rank outside the world, a negative step count
        (["--faults", "bogus@x"], [f"--faults 'bogus@x': {KINDS} (got \"bogus\")",
                                   "--faults 'bogus@x': step must be a whole number >= 0 (got \"x\")"]),
        (["--faults", "exception@10:5"], ["--faults 'exception@10:5': rank must be below 2, the run's workers "
                                          "(local.nproc 2) (got 5)"]),
        (["--steps", "-3"], ["--steps: a whole number >= 1 (got -3)"]),
        # every bad value at once, what each allows
        (
            ["--steps", "x", "--nproc", "0", "--mode", "fast", "--port", "80", "--faults", "node-loss@3:1,oom@2/later"],
            [
                '--steps: a whole number >= 1 (got "x")',
                "--nproc: a whole number >= 1 (got 0)",
                '--mode: one of sync-ckpt, async-ckpt, inprocess, ft-launcher, inprocess-ft, k8s-only (got "fast")',
                "--port: a whole number from 1024 to 65535 (got 80)",
                "--faults 'node-loss@3:1': a node fault needs a local cluster (--nodes N)",
                "--faults 'oom@2/later': phase must be one of init, step, checkpoint, restore, eval (got \"later\")",
            ],
        ),
        (["--steps", "30", "--faults", "hang@40,hang@20/eval"], [
            "--faults 'hang@40': step must be at most 30: the run's last step (got 40)",
            "--faults 'hang@20/eval': an eval fault never fires: no evaluation in 30 steps (train.eval_interval 50)",
        ]),
        (["--steps", "30"], ["local.faults 'exception@40:1': step must be at most 30: the run's last step (got 40)"]),
        (
            ["--nodes", "2", "--nproc", "1", "--steps", "50", "--faults", "node-loss@20:2,evict@60:1,exception@5:2"],
            [
                "--faults: node fault 'node-loss@20:2': pod index 2 is not below the 2 pods of the Job",
                "--faults 'evict@60:1': step must be at most 50: the run's last step (got 60)",
                "--faults 'exception@5:2': rank must be below 2, the run's workers (--nproc 1 x --nodes 2) (got 2)",
            ],
        ),
        (
            ["--nodes", "0", "--node-replace-s", "-1", "--timeout-s", "0", "--host-gpus", "2", "--faults", ""],
            [
                "--nodes: a whole number >= 1 (got 0)",
                "--node-replace-s: a number >= 0 (got -1)",
                "--timeout-s: a number > 0 (got 0)",
                "--host-gpus: with --nodes N --synth-only only: a run uses this host's GPUs (got 2)",
            ],
        ),
        (["--nodes", "2", "--node-timeline", "gke", "--timeline-set", "provision_s=-1", "--timeline-set", "boot=3"], [
            '--node-timeline: one of fast, eks (got "gke")',
            "--timeline-set 'provision_s=-1': must be a finite number >= 0",
            f"--timeline-set 'boot=3': expected KEY=VALUE with KEY one of {', '.join(TIMELINE_KEYS)}",
        ]),
        (["--synth-only", "--port", "2000", "--store-port", "2000"], [
            "--synth-only: with --nodes N only (a local cluster's manifests)",
            "--store-port: a port other than --port's (both listen on this host) (got 2000)",
        ]),
    ],
)  # fmt: skip
def test_bad_flags_end_the_command_with_one_message(flags, expected, config, tmp_path, capsys) -> None:
    assert refused(["--run-dir", str(tmp_path / "run"), "--config", str(config), *flags], capsys) == expected
    assert not (tmp_path / "run").exists()  # nothing started


def test_the_configurations_errors_join_the_flags_and_alone_keep_their_own_exit(config, tmp_path, capsys) -> None:
    run = ["--run-dir", str(tmp_path / "run"), "--config", str(config)]
    lines = refused([*run, "--steps", "0", "--env", "nope"], capsys)
    assert lines == [
        "--steps: a whole number >= 1 (got 0)",
        f"invalid configuration ({config}): environment 'nope' is not defined; allowed: default, (none)",
    ]
    with pytest.raises(ConfigError, match="environment 'nope' is not defined"):  # main: "error: ...", status 1
        parse_args([*run, "--env", "nope"])


def test_random_faults_that_do_not_fit_the_run_are_refused(tmp_path, capsys) -> None:
    path = tmp_path / "random.yaml"
    path.write_text(yaml.safe_dump({"faults": {"random": {"count": 5}}}))
    lines = refused(["--run-dir", str(tmp_path / "run"), "--config", str(path), "--steps", "4", "--faults", ""], capsys)
    assert lines == ["faults.random.count: at most 3 random fault(s) fit in a run of 4 steps (got 5)"]


def test_good_flags_pass(config, tmp_path) -> None:
    args = parse_args(["--run-dir", str(tmp_path), "--config", str(config), "--steps", "40", "--nproc", "2",
                       "--faults", "exception@0:1/init,hang@40:0", "--mode", "k8s-only"])  # fmt: skip
    assert (args.steps, args.nproc, args.mode, args.faults) == (40, 2, "k8s-only", "exception@0:1/init,hang@40:0")


def test_an_unknown_fault_kind_exits_2_at_once_without_starting_a_launcher(config, tmp_path) -> None:
    """The issue's first case as a user types it: before, the launcher and workers started and it ended after 6 s
    with exit 42 (fail the Job), the cause only in launcher.log."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "training.local", "--run-dir", str(tmp_path / "R"), "--config", str(config),
         "--faults", "bogus@x"],
        cwd=REPO_ROOT, env=child_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert time.monotonic() - t0 < 10  # about 0.3 s on the 2-core machine; a launcher alone takes seconds
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == HEAD + f"  - --faults 'bogus@x': {KINDS} (got \"bogus\")\n" + (
        "  - --faults 'bogus@x': step must be a whole number >= 0 (got \"x\")\n"
    )
    assert proc.stdout == "" and not (tmp_path / "R").exists()


def test_the_eks_node_timeline_flags_and_their_defaults(tmp_path):
    args = parse_args(
        ["--run-dir", str(tmp_path / "r"), "--nodes", "2", "--node-timeline", "eks", "--spare-nodes", "1"]
    )
    assert (args.node_timeline, args.spare_nodes, args.timeline_set, args.timeout_s) == ("eks", 1, [], None)
    assert CLUSTER_TIMEOUT_S == {"fast": 900.0, "eks": 3600.0}  # the Job's limit when --timeout-s is not given
    args = parse_args(["--run-dir", str(tmp_path / "r"), "--nodes", "2", "--timeline-set", "provision_s=60"])
    assert (args.node_timeline, args.spare_nodes, args.timeline_set) == ("fast", 0, ["provision_s=60"])
