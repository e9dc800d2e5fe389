"""The pod supervisor's decision after its launcher exited (``training.resilience.supervisor``): a table of cases."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.training_runs import REPO_ROOT
from training.resilience.supervisor import Decision, WorkerExit, decide, read_exits

NOW = 10_000.0


def _decide(rc, exits, history=(), *, in_job=False, host_moved=False, max_in_window=3, window_s=600.0, nproc=1):
    exits = [WorkerExit(ts, restart, rank, code) for ts, restart, rank, code in exits]
    return decide(
        rc,
        exits,
        list(history),
        NOW,
        unrecoverable=42,
        restarts_in_job=in_job,
        max_in_window=max_in_window,
        window_s=window_s,
        nproc=nproc,
        host_moved=host_moved,
    )


@pytest.mark.parametrize(
    ("case", "args", "kwargs", "action", "code"),
    [
        ("success", (0, [(5.0, 0, 0, 0), (5.1, 0, 1, 0)]), {"nproc": 2}, "exit", 0),
        ("launcher 0 without its workers' success is a lost peer", (0, []), {}, "relaunch", 0),
        (
            "launcher 0 after the host closed the rendezvous: only one of two workers succeeded",
            (0, [(5.0, 2, 0, 0), (4.0, 1, 1, 137)]),
            {"in_job": True, "nproc": 2},
            "relaunch",
            0,
        ),
        ("success after a recovered failure", (0, [(1.0, 0, 0, 10), (9.0, 1, 0, 0)]), {}, "exit", 0),
        (
            "NVRx 0.4.1 exits 0 after its restarts ran out on rank 0: not a success",
            (0, [(1.0, 3, 0, 3), (1.2, 3, 1, 0)]),
            {"in_job": True, "max_in_window": 1},
            "exit",
            3,
        ),
        ("a worker's fail-the-Job code wins", (1, [(1.0, 0, 1, 14), (2.0, 0, 0, 20)]), {}, "exit", 20),
        ("torchrun: a local fault ends the pod", (1, [(1.0, 0, 0, 10), (1.5, 0, 1, 143)]), {}, "exit", 10),
        ("torchrun: an OOM-killed worker ends the pod", (1, [(1.0, 0, 1, 137)]), {}, "exit", 137),
        ("torchrun: a crash (exit 1) ends the pod", (1, [(1.0, 0, 0, 1)]), {}, "exit", 1),
        ("the earliest local fault names the code", (1, [(3.0, 0, 1, 13), (2.0, 0, 0, 12)]), {}, "exit", 12),
        ("every worker lost a peer: rejoin", (1, [(1.0, 0, 0, 14), (1.1, 0, 1, 14)]), {}, "relaunch", 0),
        ("lost peer and a stopped sibling: rejoin", (1, [(1.0, 0, 0, 14), (1.1, 0, 1, 143)]), {}, "relaunch", 0),
        ("launcher failed with no worker exit (rendezvous): rejoin", (1, []), {}, "relaunch", 0),
        (
            "ft_launcher: only the last generation counts",
            (1, [(1.0, 0, 0, 10), (5.0, 1, 0, 14), (5.1, 1, 1, 14)]),
            {"in_job": True},
            "relaunch",
            0,
        ),
        (
            "ft_launcher out of restarts on rare local faults: a fresh launcher (charged 1 + 1 failure of 3)",
            (1, [(1.0, 3, 0, 10)]),
            {"in_job": True},
            "relaunch",
            0,
        ),
        (
            "ft_launcher out of restarts on a crash loop (4 failures > budget 3): Kubernetes replaces the pod",
            (1, [(1.0, 0, 0, 3), (2.0, 1, 0, 3), (3.0, 2, 0, 3), (4.0, 3, 0, 3)]),
            {"in_job": True},
            "exit",
            3,
        ),
        ("host moved, workers killed: rejoin", (137, [(1.0, 0, 0, 137)]), {"host_moved": True}, "relaunch", 0),
        (
            "host moved with the budget spent: fail the Job",
            (137, [], [9_500.0, 9_700.0, 9_900.0]),
            {"host_moved": True},
            "exit",
            42,
        ),
        (
            "budget spent by lost peers: fail the Job",
            (1, [(1.0, 0, 0, 14)], [9_500.0, 9_700.0, 9_900.0]),
            {},
            "exit",
            42,
        ),
        (
            "relaunches outside the window do not count",
            (1, [(1.0, 0, 0, 14)], [1_000.0, 2_000.0, 9_000.0, 9_900.0]),
            {},
            "relaunch",
            0,
        ),
        (
            "ft_launcher local fault with the budget spent: Kubernetes replaces the pod",
            (1, [(1.0, 3, 0, 10)], [9_500.0, 9_700.0, 9_900.0]),
            {"in_job": True},
            "exit",
            10,
        ),
    ],
)
def test_decision_table(case, args, kwargs, action, code):
    decision = _decide(*args, **kwargs)
    assert (decision.action, decision.code) == (action, code), f"{case}: {decision}"


def test_relaunches_charge_the_budget_with_the_failures_they_follow():
    peer = _decide(1, [(1.0, 0, 0, 14)])
    assert peer.charge == (NOW,)
    local = _decide(1, [(7.0, 0, 0, 10), (8.0, 1, 1, 12), (9.0, 1, 0, 143)], in_job=True)
    assert (local.action, local.charge) == ("relaunch", (7.0, 8.0, NOW))
    assert _decide(1, [(1.0, 0, 0, 10)]).charge == ()  # an exit charges nothing: Kubernetes counts it


def test_the_reason_names_the_budget_and_the_failed_rank():
    spent = _decide(1, [(1.0, 0, 0, 14)], [9_500.0, 9_700.0, 9_900.0])
    assert "3 charged in the last 600 s (job.relaunch.max_in_window = 3)" in spent.reason
    local = _decide(1, [(1.0, 0, 1, 12)])
    assert local.line() == "exit 12 local rank 1 failed with 12: Kubernetes replaces this pod"
    assert Decision("relaunch", 0, "why").line() == "relaunch why"


def test_malformed_exit_lines_are_skipped(tmp_path):
    log = tmp_path / "exits"
    log.write_text("1.5 0 1 14\ngarbage\n2.0 1 0\n3.25 2 3 143\n")
    assert read_exits(log) == [WorkerExit(1.5, 0, 1, 14), WorkerExit(3.25, 2, 3, 143)]
    assert read_exits(tmp_path / "missing") == []


def test_cli_prints_the_decision_and_records_a_relaunch(tmp_path):
    exits, history = tmp_path / "exits", tmp_path / "history"
    exits.write_text("100.0 0 0 14\n")
    cmd = [sys.executable, "-m", "training.resilience.supervisor", "decide", "--exits", str(exits)]
    cmd += ["--history", str(history), "--rc", "1", "--unrecoverable", "42", "--max-in-window", "1", "--window-s", "60"]
    cmd += ["--nproc", "2"]
    first = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60)
    assert first.stdout.startswith("relaunch a peer was lost (launcher exit 1)")
    assert len(history.read_text().split()) == 1
    second = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60)
    assert second.stdout.startswith("exit 42 a peer was lost (launcher exit 1), too often")


def _wait(rc, exits, *, launch_s, waiting_since, history=(), host_moved=False):
    """A launch on the rendezvous path with a 120 s join timeout and a 900 s lost-peer deadline (NOW = 10,000)."""
    return decide(
        rc,
        [WorkerExit(*e) for e in exits],
        list(history),
        NOW,
        unrecoverable=42,
        restarts_in_job=True,
        max_in_window=3,
        window_s=600.0,
        nproc=2,
        host_moved=host_moved,
        launch_s=launch_s,
        join_timeout_s=120.0,
        waiting_since=waiting_since,
        deadline_s=900.0,
    )


def test_a_launch_that_timed_out_waiting_for_peers_relaunches_uncharged_until_the_deadline():
    full = [NOW - 60.0, NOW - 50.0, NOW - 40.0]  # the windowed budget is spent: rule 6 would exit 42
    first = _wait(1, [], launch_s=121, waiting_since=None, history=full)
    assert (first.action, first.charge) == ("relaunch", ())
    assert "waiting for a lost peer's replacement for 0 s of job.lost_peer_deadline_s = 900" in first.reason
    later = _wait(1, [], launch_s=125, waiting_since=NOW - 899.0, history=full)
    assert (later.action, later.charge) == ("relaunch", ())
    over = _wait(1, [], launch_s=121, waiting_since=NOW - 900.0)
    assert (over.action, over.code) == ("exit", 42)
    assert over.reason == "a lost peer's replacement did not join within job.lost_peer_deadline_s = 900 s"


def test_only_a_launch_that_waited_out_its_join_timeout_is_a_wait_for_peers():
    crashed = _wait(1, [], launch_s=3, waiting_since=NOW - 10.0)  # a launcher that failed at once: rule 6, charged
    assert (crashed.action, crashed.charge) == ("relaunch", (NOW,))
    ran = _wait(1, [(NOW - 5, 0, 0, 14), (NOW - 5, 0, 1, 14)], launch_s=300, waiting_since=None)  # workers ran
    assert (ran.action, ran.charge) == ("relaunch", (NOW,))
    moved = _wait(1, [], launch_s=300, waiting_since=NOW - 10.0, host_moved=True)  # rule 3, charged
    assert (moved.action, moved.charge) == ("relaunch", (NOW,))
