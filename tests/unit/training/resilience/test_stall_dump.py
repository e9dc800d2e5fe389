"""Stall stack dumps: threshold parsing, and a real dump from a stalled child process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.training_runs import REPO_ROOT
from training.resilience.stall_dump import ENV, StallDump, threshold_s


def test_threshold_parsing() -> None:
    assert threshold_s({}) == 0.0
    assert threshold_s({ENV: " 12.5 "}) == 12.5
    assert not StallDump(0.0).enabled
    for bad in ("soon", "-1"):
        with pytest.raises(ValueError, match=ENV):
            threshold_s({ENV: bad})


SCRIPT = """
import time
from training.resilience.stall_dump import StallDump
d = StallDump(0.3)
for _ in range(5):  # progress every 50 ms: no dump
    d.progress(); time.sleep(0.05)
print("progressing done", flush=True)
def stuck_in_here():
    time.sleep(1.0)
stuck_in_here()
d.stop()
"""


def test_a_stall_dumps_every_thread_stack_once() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert "progressing done" in proc.stdout
    assert proc.stderr.count("Timeout (0:00:00") == 1, proc.stderr
    assert "stuck_in_here" in proc.stderr
