"""A benchmark's run stopped at its timeout takes its whole process tree with it (launcher, workers), not only
``training.local``: real processes, looked up in /proc afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from benchmarks.common import run_local

pytestmark = pytest.mark.integration


def _alive(run_dir: Path) -> list[int]:
    """Processes whose command line names ``run_dir``."""
    procs = psutil.process_iter(["cmdline"])
    return [p.pid for p in procs if str(run_dir) in " ".join(p.info["cmdline"] or [])]


def test_a_timed_out_run_leaves_no_process_behind(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    log = tmp_path / "run.log"
    # 6 s: past the workers' start, long before 5,000 steps end (minutes): what is alive later was left behind
    rc, _ = run_local(run_dir, mode="inprocess-ft", steps=5000, faults="", nproc=2, port=29870, timeout_s=6)
    assert rc == 124
    deadline = time.monotonic() + 30  # NVRx's monitor daemons (a session of their own) follow their workers
    while _alive(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(run_dir) == [], log.read_text()[-3000:]
