"""``make submit`` against a stand-in kubectl: the dataset Job runs and completes before the training Job is applied.

The real script, the real ``cdk8s synth`` and manifest validation; only ``kubectl`` is a recording stand-in (no
cluster here), answering like the API server would: no training Job yet, no dataset Job, then a completed one.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (REPO / "node_modules" / ".bin" / "cdk8s").exists(), reason="cdk8s CLI missing"),
]
IMAGE = "111122223333.dkr.ecr.us-east-1.amazonaws.com/fsdp-training:submit-test"
COMPLETE = {"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}
FAILED = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}


def stand_in_kubectl(bin_dir: Path, log: Path, prep_result: dict) -> None:
    """Records every call; ``get job`` finds nothing until the dataset Job was applied, which then reports
    ``prep_result``, and the training Job reports Complete once applied (no pods, no events); ``apply`` prints
    what it was given."""
    (bin_dir / "prep.json").write_text(json.dumps(prep_result))
    script = bin_dir / "kubectl"
    script.write_text(
        f"""#!/bin/bash
echo "$*" >> "{log}"
case "$*" in
  *"apply -f"*dataset-prep*) touch "{bin_dir}/applied"; echo "job.batch/prep created" ;;
  *"apply -f"*train-*) touch "{bin_dir}/training"; echo "applied $4" ;;
  *"apply -f"*) echo "applied $4" ;;
  *"get job fsdp-train-prepare-data -o json") cat "{bin_dir}/prep.json" ;;
  *"get job"*) [ -e "{bin_dir}/training" ] || {{ echo 'Error from server (NotFound)' >&2; exit 1; }}
    echo '{json.dumps(COMPLETE)}' ;;
  *"get pods"*|*"get events"*) echo '{{"items": []}}' ;;
  *logs*) echo "prepare: failed" ;;
esac
"""
    )
    script.chmod(0o755)


def submit(
    tmp_path: Path, prep_result: dict, mode: str = "ft-launcher", **extra: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text("#!/bin/bash\nexit 1\n")
    (bin_dir / "aws").chmod(0o755)
    log = tmp_path / "kubectl.log"
    stand_in_kubectl(bin_dir, log, prep_result)
    path = f"{bin_dir}:{REPO / '.venv' / 'bin'}:{REPO / 'node_modules' / '.bin'}:{os.environ['PATH']}"
    env = {
        **os.environ,
        "PATH": path,
        "TRAINING_IMAGE_URI": IMAGE,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    env.update(extra)
    done = subprocess.run(
        ["bash", "scripts/submit.sh", "default", mode],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return done, calls


def applied(calls: list[str]) -> list[str]:
    return [Path(c.split("apply -f ")[1]).name for c in calls if c.startswith("apply -f ")]


def test_dataset_job_completes_before_training_is_applied(tmp_path: Path) -> None:
    done, calls = submit(tmp_path, COMPLETE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert applied(calls) == [
        "training-config.k8s.yaml",
        "image-prepull.k8s.yaml",
        "dataset-prep.k8s.yaml",
        "training-service.k8s.yaml",
        "train-ft-launcher.k8s.yaml",
    ]
    waits = [i for i, c in enumerate(calls) if c == "-n training get job fsdp-train-prepare-data -o json"]
    assert waits and waits[-1] < calls.index(next(c for c in calls if "training-service" in c))
    assert "wait_job: training/fsdp-train-prepare-data: complete" in done.stdout
    # then it follows the training Job to its end (scripts/follow_job.py)
    assert "-n training get job fsdp-train-ft-launcher -o json" in calls
    assert done.stdout.splitlines()[-1] == "== Job training/fsdp-train-ft-launcher: Complete =="


def test_a_failed_dataset_job_stops_the_submission(tmp_path: Path) -> None:
    done, calls = submit(tmp_path, FAILED)
    assert done.returncode == 1
    assert applied(calls) == ["training-config.k8s.yaml", "image-prepull.k8s.yaml", "dataset-prep.k8s.yaml"]
    assert "the dataset Job did not complete; the training Job was not applied" in done.stderr


def test_prepare_data_can_be_skipped(tmp_path: Path) -> None:
    done, calls = submit(tmp_path, COMPLETE, SUBMIT_PREPARE_DATA="0", SUBMIT_FOLLOW="0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert applied(calls) == [
        "training-config.k8s.yaml",
        "image-prepull.k8s.yaml",
        "training-service.k8s.yaml",
        "train-ft-launcher.k8s.yaml",
    ]
    assert "Submitted. Follow it with: python -m scripts.follow_job --namespace training" in done.stdout
    assert not any("get job fsdp-train-ft-launcher" in c for c in calls[1:])  # only the "exists already?" check


def test_an_unknown_mode_ends_the_submission_before_anything_is_called(tmp_path: Path) -> None:
    """The mode is checked first (scripts/submit_settings.py): exit 2 with the allowed ones, no kubectl, no aws."""
    done, calls = submit(tmp_path, COMPLETE, mode="fast")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "submit: unknown MODE 'fast'; allowed: sync-ckpt async-ckpt inprocess ft-launcher" in done.stderr
    assert calls == [] and done.stdout == ""
