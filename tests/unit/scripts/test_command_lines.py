"""The scripts' command lines: bad values end them with status 2 and one message naming each, before anything runs;
``make submit``'s settings refuse a fault schedule that would not fire in the Job before any pod starts."""

from __future__ import annotations

import importlib

import pytest

from platform_config import config_from_dict
from scripts import submit_settings


@pytest.mark.parametrize(
    ("module", "argv", "lines"),
    [
        ("check_image", ["--lock", "{tmp}/none.lock", "--keep", "{tmp}/extra.json"], [
            '--lock: the image\'s lock file (python -m scripts.lock_image writes it) (got "{tmp}/none.lock")',
            '--keep: a directory, or a path to create one at (got "{tmp}/extra.json")']),
        ("wait_job", ["--namespace", "t", "--job", "j", "--timeout", "-1", "--interval", "0"], [
            "--timeout: a number >= 0 (got -1)", "--interval: a number > 0 (got 0)"]),
        ("reliability_report", ["--results", "{tmp}/none.json", "--out", "{tmp}/r.md"], [
            "--results: the fault matrix's results (pytest tests/integration/training/test_fault_matrix.py writes "
            'them) (got "{tmp}/none.json")']),
    ],
)  # fmt: skip
def test_bad_values_end_the_script_before_it_runs(module, argv, lines, tmp_path, capsys) -> None:
    script = importlib.import_module(f"scripts.{module}")
    (tmp_path / "extra.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        script.main([a.format(tmp=tmp_path) for a in argv])
    assert exc.value.code == 2
    expected = "".join(f"  - {line.format(tmp=tmp_path)}\n" for line in lines)
    assert capsys.readouterr().err == f"error: invalid arguments (python -m scripts.{module}):\n" + expected
    assert not (tmp_path / "r.md").exists()


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--soft", "0", "--repeats", "0"], "argument --soft: expected a number > 0 (got '0')"),
        (["--repeats", "1.5"], "argument --repeats: expected a number > 0 (got '1.5')"),
        (["--soft", "5", "--cap", "5"], "--cap 5: must be more seconds than --soft 5 (the hang must outlast it)"),
    ],
)
def test_the_standalone_repro_refuses_with_argparse_s_own_error(argv, error, capsys) -> None:
    """``python scripts/nvrx_monitor_repro.py`` needs only torch and NVRx: argparse's error, the first bad value."""
    from scripts.nvrx_monitor_repro import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.endswith(f"error: {error}\n")


WORLD = "the run's workers (gpu_nodes.node_count 2 x 8 GPUs of p5.48xlarge)"


@pytest.mark.parametrize(
    ("faults", "lines"),
    [
        ({"schedule": "exception@40:15,hang@0:0/init,oom@180/checkpoint,hang@150/eval"}, []),
        ({"schedule": "exception@40:16"}, [
            f"faults.schedule 'exception@40:16': rank must be below 16, {WORLD} (got 16)"]),
        ({"schedule": "sigkill@181,hang@160/eval"}, [
            "faults.schedule 'sigkill@181': step must be at most 180: the run's last step (got 181)",
            "faults.schedule 'hang@160/eval': step must be at most 150: the run's last evaluation "
            "(train.eval_interval 50) (got 160)"]),
        ({"random": {"count": 300}}, ["faults.random.count: at most 179 random fault(s) fit in a run of 180 steps "
                                      "(got 300)"]),
    ],
)  # fmt: skip
def test_the_jobs_fault_schedule_is_checked_against_its_nodes_gpus_and_steps(faults, lines) -> None:
    """2 nodes of the schema's p5.48xlarge (8 GPUs), 180 steps, an evaluation every 50 (the last at 150)."""
    cfg = config_from_dict({"gpu_nodes": {"node_count": 2}, "train": {"steps": 180, "eval_interval": 50},
                            "faults": faults})  # fmt: skip
    assert submit_settings.fault_problems(cfg) == lines


def test_a_schedule_that_would_not_fire_assigns_nothing_and_exits_2(monkeypatch, capsys) -> None:
    cfg = config_from_dict({"gpu_nodes": {"node_count": 2}, "faults": {"schedule": "exception@5:99"}})
    monkeypatch.setattr(submit_settings, "load_config", lambda: cfg)
    assert submit_settings.main(["k8s-only"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "error: invalid arguments (python -m scripts.submit_settings):\n"
        f"  - faults.schedule 'exception@5:99': rank must be below 16, {WORLD} (got 99)\n"
    )
