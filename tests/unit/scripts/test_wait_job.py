"""Waiting for the dataset Job: Job status parsing, and the CLI polling a stand-in kubectl."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.wait_job import job_state

REPO = Path(__file__).resolve().parents[3]
RUNNING = {"status": {"active": 1, "startTime": "2026-12-01T10:00:00Z"}}
COMPLETE = {
    "status": {
        "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2026-12-01T10:05:00Z"},
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-01T10:05:00Z"},
        ],
    }
}
DEADLINE = {
    "status": {
        "failed": 1,
        "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"},
            {
                "type": "Failed",
                "status": "True",
                "reason": "DeadlineExceeded",
                "message": "Job was active longer than specified deadline",
            },
        ],
    }
}


def test_states() -> None:
    assert job_state(RUNNING) == ("running", "active 1, failed pods 0")
    assert job_state(COMPLETE) == ("complete", "completed at 2026-12-01T10:05:00Z")
    assert job_state(DEADLINE) == ("failed", "DeadlineExceeded: Job was active longer than specified deadline")
    assert job_state({"status": {"conditions": [{"type": "Failed", "status": "False"}]}})[0] == "running"


def fake_kubectl(tmp_path: Path, *responses: dict) -> dict[str, str]:
    """A kubectl on PATH that prints the next JSON response on each call (the last one repeats)."""
    for i, response in enumerate(responses):
        (tmp_path / f"r{i}.json").write_text(json.dumps(response))
    script = tmp_path / "kubectl"
    script.write_text(
        "#!/bin/bash\n"
        f'n=$(cat "{tmp_path}/n" 2>/dev/null || echo 0)\n'
        f'f="{tmp_path}/r$n.json"; [ -f "$f" ] || f="{tmp_path}/r{len(responses) - 1}.json"\n'
        f'echo $((n + 1)) > "{tmp_path}/n"\n'
        'cat "$f"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}


def wait(env: dict[str, str], timeout: str = "30") -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "scripts.wait_job", "--namespace", "training", "--job", "prep"]
    argv += ["--timeout", timeout, "--interval", "0.05"]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("final", "code", "said"), [(COMPLETE, 0, "complete"), (DEADLINE, 1, "failed (DeadlineExceeded")]
)
def test_polls_until_the_job_finishes(tmp_path: Path, final: dict, code: int, said: str) -> None:
    done = wait(fake_kubectl(tmp_path, RUNNING, RUNNING, final))
    assert done.returncode == code
    lines = done.stdout.splitlines()
    assert lines[0] == "wait_job: training/prep: running (active 1, failed pods 0)"
    assert lines[-1].startswith(f"wait_job: training/prep: {said}")
    assert int((tmp_path / "n").read_text()) == 3


def test_times_out(tmp_path: Path) -> None:
    done = wait(fake_kubectl(tmp_path, RUNNING), timeout="0.2")
    assert done.returncode == 2 and "still running after 0.2 s" in done.stderr


def test_missing_job(tmp_path: Path) -> None:
    script = tmp_path / "kubectl"
    script.write_text("#!/bin/bash\necho 'Error from server (NotFound): jobs.batch \"prep\" not found' >&2\nexit 1\n")
    script.chmod(0o755)
    done = wait({**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode == 1 and 'jobs.batch "prep" not found' in done.stderr
