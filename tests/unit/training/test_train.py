"""training.train pieces that need no processes: config resolution, restart cause, hooks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from training.common.files import atomic_write_json
from training.resilience.exit_codes import read_exit_status, translate_launcher_exit
from training.resilience.restarts import newest_fault_since, restart_layer
from training.train import parse_args, resolve_config


def test_short_timeouts_and_mode_override() -> None:
    args = parse_args(["--run-dir", "/tmp/x", "--mode", "ft-launcher", "--short-timeouts"])
    cfg, mode = resolve_config(args)
    assert mode.value == "ft-launcher"
    assert cfg.inprocess == cfg.local.inprocess and cfg.ft == cfg.local.ft
    assert cfg.job.inprocess_store_port == cfg.local.inprocess_store_port


def test_restart_cause_is_the_newest_fault_since(tmp_path: Path) -> None:
    (tmp_path / "faults").mkdir()
    atomic_write_json(tmp_path / "faults" / "fired.rank0.json", {"exception@3:0/step": 100})
    atomic_write_json(tmp_path / "faults" / "fired.rank1.json", {"hang@9:1/step": 300})
    assert newest_fault_since(tmp_path, 0) == "hang"
    assert newest_fault_since(tmp_path, 50) == "hang"
    assert newest_fault_since(tmp_path, 300) is None


TRAIN_HEAD = "error: invalid arguments (training.train):\n"


@pytest.mark.parametrize(
    ("flags", "world", "expected"),
    [
        (["--mode", "nope"], "", ['--mode: one of sync-ckpt, async-ckpt, inprocess, ft-launcher, inprocess-ft, '
                                  'k8s-only (got "nope")']),
        (["--steps", "-3"], "", ["--steps: a whole number >= 1 (got -3)"]),
        (["--faults", "explode@3"], "", ['--faults \'explode@3\': kind must be one of exception, hang, sigkill, oom, '
                                         'comm (got "explode")']),
        # under a launcher: its world; and --steps
        (["--faults", "exception@10:5", "--steps", "8"], "2", [
            "--faults 'exception@10:5': rank must be below 2, the run's workers (WORLD_SIZE 2) (got 5)",
            "--faults 'exception@10:5': step must be at most 8: the run's last step (got 10)",
        ]),
        (["--steps", "0", "--faults", "hang@3:1"], "1", [
            "--steps: a whole number >= 1 (got 0)",
            "--faults 'hang@3:1': rank must be below 1, the run's workers (WORLD_SIZE 1) (got 1)",
        ]),
    ],
)  # fmt: skip
def test_bad_flags_end_the_worker_with_one_message_recorded_as_its_exit(
    flags, world, expected, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(SystemExit) as exc:
        parse_args(["--run-dir", str(tmp_path), *flags])
    assert exc.value.code == 2
    text = TRAIN_HEAD + "".join(f"  - {line}\n" for line in expected)
    assert capsys.readouterr().err == text
    # the launcher passes the cause on (a "fail the Job" code) instead of restarting into the same error
    assert read_exit_status(tmp_path) == {"code": 2, "cause": "config", "message": text, "rank": 1, "final": True}
    assert translate_launcher_exit(1, tmp_path, 42, restarts_exhausted=True)[0] == 2


def test_the_configured_schedule_is_checked_against_the_world_and_the_configured_run(
    tmp_path, monkeypatch, capsys
) -> None:
    """No --faults, no --steps: ``faults.schedule`` against ``train.steps`` (20), its evaluations (every 10) and the
    launcher's WORLD_SIZE (2); the random faults against the steps too."""
    config = tmp_path / "project.yaml"
    schedule = "exception@30:0,hang@0:3/init,oom@20:1/eval"
    config.write_text(yaml.safe_dump({"train": {"steps": 20, "eval_interval": 10},
                                      "faults": {"schedule": schedule, "random": {"count": 25}}}))  # fmt: skip
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as exc:
        parse_args(["--run-dir", str(tmp_path / "run"), "--config", str(config)])
    assert exc.value.code == 2
    assert capsys.readouterr().err == TRAIN_HEAD + (
        "  - faults.schedule 'exception@30:0': step must be at most 20: the run's last step (got 30)\n"
        "  - faults.schedule 'hang@0:3/init': rank must be below 2, the run's workers (WORLD_SIZE 2) (got 3)\n"
        "  - faults.random.count: at most 19 random fault(s) fit in a run of 20 steps (got 25)\n"
    )


def test_good_flags_pass(monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = parse_args(["--run-dir", "/tmp/x", "--steps", "40", "--faults", "exception@40:1,hang@0:1/init"])
    assert (args.steps, args.faults, args.mode) == (40, "exception@40:1,hang@0:1/init", None)


@pytest.mark.parametrize(
    ("mode", "iteration", "previous_start", "env", "expected"),
    [
        ("inprocess-ft", 0, 0, {}, None),  # the first start of the run
        ("inprocess-ft", 2, 500, {"POD_LAUNCH_NS": "400"}, ("inprocess", "peer_fault")),
        ("ft-launcher", 0, 500, {"TORCHELASTIC_RESTART_COUNT": "2"}, ("ft_launcher", "worker_failure")),
        # the launcher restarted its workers to let a replacement node in: the count stays 0
        ("inprocess-ft", 0, 500, {"POD_LAUNCH_NS": "400", "JOB_ATTEMPT": "1"}, ("ft_launcher", "worker_failure")),
        ("k8s-only", 0, 500, {"POD_LAUNCH_NS": "400"}, ("job", "peer_lost")),
        # the first worker of a replacement pod: this rank last started before the launch (on the lost pod)
        ("inprocess-ft", 0, 300, {"POD_LAUNCH_NS": "400", "JOB_ATTEMPT": "1"}, ("job", "pod_failure")),
        # the first worker after the pod's supervisor relaunched its launcher (a lost peer)
        ("k8s-only", 0, 300, {"POD_LAUNCH_NS": "400", "POD_RELAUNCH": "1"}, ("job", "peer_lost")),
        ("k8s-only", 0, 300, {"JOB_ATTEMPT": ""}, None),  # an annotation not set yet reads as ""
    ],
)
def test_the_layer_of_a_restart(tmp_path, monkeypatch, mode, iteration, previous_start, env, expected) -> None:
    from platform_config.schema import MODE_LAYERS, RecoveryMode

    for name in ("TORCHELASTIC_RESTART_COUNT", "POD_LAUNCH_NS", "JOB_ATTEMPT", "POD_RELAUNCH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert restart_layer(MODE_LAYERS[RecoveryMode(mode)], tmp_path, previous_start, iteration, None) == expected


def test_a_configuration_error_leaves_the_collector_on(tmp_path: Path) -> None:
    import gc

    from training.resilience.exit_codes import ExitCode
    from training.train import main

    assert gc.isenabled()
    code = main(["--run-dir", str(tmp_path), "--config", str(tmp_path / "missing.yaml")])
    assert code == int(ExitCode.CONFIG) and gc.isenabled()


def test_a_model_whose_state_cannot_fit_is_refused_before_set_up_and_recorded_final(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 8B model's 128.5 GB of training state on one rank of a 32 GiB host (a GPU's memory the same way)."""
    from training.parallel import distributed
    from training.resilience.exit_codes import ExitCode
    from training.train import main

    monkeypatch.setattr(
        distributed, "device_capacity", lambda: (32 << 30, "host memory per local rank (1 on this host)")
    )
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    assert main(["--run-dir", str(tmp_path), "--env", "prod", "--faults", ""]) == int(ExitCode.CONFIG)
    problem = (
        "model.size llama3-8b: 8.03 billion parameters need 128.5 GB of training state per rank at WORLD_SIZE 1 "
        "(fp32 weights, gradients and AdamW's two moments: 16 bytes a parameter, sharded by FSDP), more than 90% of "
        "host memory per local rank (1 on this host) (32.0 GiB): it needs at least 5 ranks of that memory "
        "(--nproc, --nodes), or a smaller model.size"
    )
    assert capsys.readouterr().err.endswith(f"[train] configuration error: {problem}\n")
    assert read_exit_status(tmp_path) == {"code": 2, "cause": "config", "message": problem, "rank": 0, "final": True}
