"""benchmarks.rendezvous_rejoin: the timeline of a loss from worker records (hand-made, times hand-computed), the
records read back from files, the whole process tree of an agent killed (real processes), and bad arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchmarks.rendezvous_rejoin import kill_tree, read_records, timeline

#: A first round at t=90, node 1 lost at t=100, the replacement started at t=101 (NVRx 0.4.1's shape: the next round
#: waits for the lost node's keep-alive, not for the replacement).
RECORDS = [
    {"kind": "start", "agent": "node0", "t": 90.0},
    {"kind": "start", "agent": "node1", "t": 90.2},
    {"kind": "exit", "agent": "node0", "t": 100.05},
    {"kind": "start", "agent": "replacement", "t": 114.5},
    {"kind": "start", "agent": "node0", "t": 114.3},
]


def test_the_timeline_counts_from_the_loss_to_the_later_of_the_two_new_workers() -> None:
    r = timeline(RECORDS, t_loss=100.0, t_replace=101.0, delay=1.0)
    assert r.survivor_exit_s == pytest.approx(0.05)
    assert r.replacement_start_s == pytest.approx(1.0)
    assert r.rejoin_s == pytest.approx(14.5)  # the replacement's worker, 0.2 s after the survivor's
    assert r.wait_after_replacement_s == pytest.approx(13.5)


def test_no_next_round_until_both_the_survivor_and_the_replacement_have_a_new_worker() -> None:
    first_round_only = RECORDS[:3]
    assert timeline(first_round_only, t_loss=100.0, t_replace=101.0, delay=1.0).rejoin_s is None
    without_survivor = RECORDS[:4]  # the survivor's start at 90 is before the loss: not the next round
    r = timeline(without_survivor, t_loss=100.0, t_replace=101.0, delay=1.0)
    assert r.rejoin_s is None and r.wait_after_replacement_s is None


def test_records_are_read_back_with_their_kind(tmp_path: Path) -> None:
    (tmp_path / "start-11.json").write_text(json.dumps({"agent": "node0", "t": 1.5}))
    (tmp_path / "exit-11.json").write_text(json.dumps({"agent": "node0", "t": 2.5, "error": "DistBackendError"}))
    (tmp_path / "worker.py").write_text("")
    (tmp_path / "summary.json").write_text("{}")
    assert read_records(tmp_path) == [
        {"agent": "node0", "t": 2.5, "error": "DistBackendError", "kind": "exit"},
        {"agent": "node0", "t": 1.5, "kind": "start"},
    ]


def test_kill_tree_ends_children_that_left_the_process_group() -> None:
    """The launchers start their workers in new sessions: a process group kill would leave them running."""
    parent = "import subprocess, time\n[subprocess.Popen(['sleep', '60'], start_new_session=True) for _ in range(2)]\n"
    proc = subprocess.Popen([sys.executable, "-c", parent + "time.sleep(60)"])
    try:
        deadline = time.monotonic() + 10
        # A child is listed from its fork, before it calls setsid(): wait for both to have left (CI saw the race).
        while not _two_session_leaders(children := psutil.Process(proc.pid).children()) and time.monotonic() < deadline:
            time.sleep(0.01)
        tree = [proc.pid, *(c.pid for c in children)]
        assert len(tree) == 3
        assert all(os.getsid(pid) == pid for pid in tree[1:])  # each child leads a session of its own
    finally:
        kill_tree(proc)
    assert proc.returncode == -9
    deadline = time.monotonic() + 10
    while any(_state(pid) not in ("Z", "gone") for pid in tree[1:]):
        assert time.monotonic() < deadline, "a child of the killed tree is still running"
        time.sleep(0.01)


def _two_session_leaders(children: list[psutil.Process]) -> bool:
    try:
        return len(children) == 2 and all(os.getsid(c.pid) == c.pid for c in children)
    except ProcessLookupError:
        return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
