"""``scripts/gpu_smoke.sh`` on a machine without a GPU: it says so, runs the CPU fallback, and leaves the
three files per run that fit the device tool's limit on returned files."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import torch

from tests.helpers.training_runs import REPO_ROOT, child_env, shared_template
from training.launch.prefork import ZYGOTE_ENV

pytestmark = pytest.mark.integration


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback of the GPU script")
def test_gpu_smoke_script_leaves_log_report_and_archive(tmp_path: Path) -> None:
    name = f"gsmoke-{tmp_path.name}"  # the script runs in /tmp/NAME; unique per test run
    out = tmp_path / "out"
    env = child_env(SMOKE_STEPS="20", SMOKE_SPECS=f"{name}:exception@8:1", SMOKE_RUN_TIMEOUT="150")
    env[ZYGOTE_ENV] = shared_template()  # the run's template is forked from this process's: no imports of its own
    try:
        proc = subprocess.run(
            ["bash", "scripts/gpu_smoke.sh", str(out)],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        shutil.rmtree(Path("/tmp") / name, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "no CUDA GPU here; running the CPU fallback" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [f"{name}.log", f"{name}.report.txt", f"{name}.tgz", "versions.txt"]
    assert "step 20/20" in (out / f"{name}.log").read_text()
    assert "inprocess" in (out / f"{name}.report.txt").read_text()
    with tarfile.open(out / f"{name}.tgz") as archive:
        names = set(archive.getnames())
    for member in ("events.jsonl", "launcher.log", "report.json", "leftovers.txt", "logs/inprocess_monitor_0.log"):
        assert f"{name}/{member}" in names
    assert not [n for n in names if n.endswith(".distcp") or "/data/" in n]
