"""SIGTERM in a worker (``training.resilience.sigterm``), in real processes with real signals: a clean stop when
the main thread runs Python, an immediate exit 143 when it is blocked in C (a torch store wait stands in for an NCCL
collective waiting on a dead peer: neither returns to the interpreter), and a forked child's SIGTERM leaves its
parent alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.helpers.training_runs import REPO_ROOT, child_env

PRELUDE = """
import os, sys, time
from training.resilience import sigterm
sigterm.install()
"""

BLOCKED_IN_C = (
    PRELUDE
    + """
import datetime
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=60))
print("ready", flush=True)
try:
    store.wait(["never"])  # C++: Python's handler cannot run until this returns (after 60 s)
except sigterm.Terminated:
    print("handler ran", flush=True)
"""
)

IN_PYTHON = (
    PRELUDE
    + """
print("ready", flush=True)
try:
    while True:
        sum(range(1000))
except sigterm.Terminated:
    print("clean stop", flush=True)
    sys.exit(sigterm.TERMINATED_EXIT_CODE)
"""
)

FORKED_CHILD = (
    PRELUDE
    + """
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
print("ready", flush=True)
time.sleep(0.5)
os.kill(pid, 15)
os.waitpid(pid, 0)
time.sleep(2.5)  # longer than the watcher's grace
print("parent alive", flush=True)
"""
)


def _terminate(script: str, *, signal_self: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    if signal_self:
        time.sleep(0.3)  # inside the blocking call / the loop
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_main_thread_blocked_in_c_exits_143_at_once() -> None:
    done = _terminate(BLOCKED_IN_C)
    assert done.returncode == 143, done.stdout + done.stderr[-2000:]
    assert "SIGTERM not taken within 1 s" in done.stdout and "handler ran" not in done.stdout


def test_a_main_thread_in_python_stops_cleanly() -> None:
    done = _terminate(IN_PYTHON)
    assert done.returncode == 143, done.stderr[-2000:]
    assert "clean stop" in done.stdout and "not taken" not in done.stdout


def test_a_forked_childs_sigterm_leaves_the_parent_running() -> None:
    done = _terminate(FORKED_CHILD, signal_self=False)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "parent alive" in done.stdout and "not taken" not in done.stdout
