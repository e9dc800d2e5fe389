"""``python -m scripts.submit_settings MODE``: the values ``scripts/submit.sh`` evaluates, from project.yaml."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from scripts.submit_settings import main
from tests.helpers.training_runs import REPO_ROOT, child_env


def _assigned(out: str) -> dict[str, str]:
    pairs = (shlex.split(line)[0].split("=", 1) for line in out.splitlines())
    return dict(pairs)


@pytest.mark.parametrize(
    ("env", "mode", "region", "job"),
    [
        ("default", "ft-launcher", "us-east-1", "fsdp-train-ft-launcher"),
        ("prod", "k8s-only", "us-west-2", "fsdp-train-k8s-only"),
    ],
)
def test_each_value_comes_from_the_environment_s_config(monkeypatch, capsys, env, mode, region, job) -> None:
    """project.yaml: ``aws.region`` us-east-1, prod's us-west-2; ``job.job_name`` fsdp-train, namespace training; the
    dataset Job's deadline 7200 s (the schema's default)."""
    monkeypatch.setenv("PROJECT_ENV", env)
    assert main([mode]) == 0
    assert _assigned(capsys.readouterr().out) == {
        "region": region,
        "namespace": "training",
        "job": job,
        "prep": "fsdp-train-prepare-data",
        "deadline": "7200",
        "placeholder": "image-not-set.invalid/set-training-image-uri:placeholder",
    }


def test_an_unknown_mode_is_refused_with_the_allowed_ones_and_assigns_nothing(capsys) -> None:
    assert main(["fast"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "unknown MODE 'fast'; allowed: sync-ckpt async-ckpt inprocess ft-launcher inprocess-ft k8s-only" in err


def test_a_bad_environment_name_ends_with_the_config_error(monkeypatch) -> None:
    monkeypatch.setenv("PROJECT_ENV", "no-such-env")
    with pytest.raises(SystemExit) as exc:
        main(["ft-launcher"])
    assert str(exc.value).startswith("error: ") and "no-such-env" in str(exc.value)


def test_bash_evaluates_the_output_into_its_variables() -> None:
    """What submit.sh does with it: ``eval`` in bash, the placeholder's ``:`` and ``/`` included."""
    script = 'eval "$(python -m scripts.submit_settings inprocess-ft)"; echo "$job|$deadline|$placeholder"'
    env = child_env(PROJECT_ENV="default")
    done = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "fsdp-train-inprocess-ft|7200|image-not-set.invalid/set-training-image-uri:placeholder\n"
