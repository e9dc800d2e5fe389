"""Exit codes, escalation ledger and launcher exit translation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from torch.distributed import DistNetworkError, DistStoreError

from tests.helpers.training_runs import REPO_ROOT
from tests.helpers.training_runs import test_env as child_env
from training.checkpoint.errors import (
    CheckpointPeerError,
    CheckpointRootMissingError,
    CheckpointWriteError,
    MarkerReadError,
)
from training.resilience.exit_codes import (
    ExitCode,
    FailureLedger,
    UnrecoverableError,
    check_codes,
    classify,
    exit_code_for,
    fail_job_exit_codes,
    read_exit_status,
    translate_launcher_exit,
    write_exit_status,
)
from training.resilience.faults import InjectedFault


def test_codes_are_distinct_and_unrecoverable_must_not_collide() -> None:
    check_codes(42)
    for bad in (0, 1, 10, 21):
        with pytest.raises(ValueError, match="collides"):
            check_codes(bad)
    assert fail_job_exit_codes(42) == [2, 20, 22, 42]


def test_classify_causes() -> None:
    assert classify(InjectedFault("hang", 3, 1)) == "hang"
    assert classify(RuntimeError("DefaultCPUAllocator: can't allocate memory")) == "oom"
    assert classify(InjectedFault("comm", 3, 1)) == "comm"  # the rank that broke its collective
    # What its peers see (the messages gloo and the c10d store raised in real runs): another rank's failure
    assert classify(RuntimeError("Connection closed by peer [127.0.0.1]:1")) == "peer_lost"
    assert classify(RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv")) == (
        "peer_lost"
    )
    assert classify(DistStoreError("wait timeout after 3000ms, keys: /train_iter1/0//cpu//0/1")) == "peer_lost"
    assert classify(DistNetworkError("Broken pipe")) == "peer_lost"
    assert classify(TimeoutError("store barrier: 3 of 4 ranks arrived within 20 s")) == "peer_lost"
    assert exit_code_for("peer_lost", 42) == ExitCode.PEER_LOST == 14
    assert classify(ValueError("x")) == "exception"
    assert classify(CheckpointWriteError("ENOSPC")) == classify(MarkerReadError("EIO")) == "checkpoint_write"
    # a save whose collective lost its peer (a node lost during a sync save): the peer's failure, not this rank's
    try:
        try:
            raise RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 3000ms for send operation")
        except RuntimeError as e:
            raise CheckpointWriteError("checkpoint of step 25 failed") from e
    except CheckpointWriteError as e:
        assert classify(e) == "peer_lost"
    # a save that failed on other ranks only (they were stopped in it): this rank leaves as a lost peer
    assert classify(CheckpointPeerError("checkpoint at step 35 failed: rank 1 failed in the save")) == "peer_lost"
    assert classify(CheckpointRootMissingError("gone")) == "checkpoint_root_missing"
    assert exit_code_for("checkpoint_root_missing", 42) == 22
    assert exit_code_for("checkpoint_write", 42) == ExitCode.CHECKPOINT_WRITE
    assert exit_code_for("unrecoverable", 42) == 42


def test_ledger_escalates_after_max_repeats(tmp_path: Path) -> None:
    ledger = FailureLedger(tmp_path, rank=1, max_repeats=2)
    for _ in range(2):
        ledger.record("exception", 7)
        ledger.check()
    ledger.record("exception", 8)
    ledger.record("exception", 7)
    with pytest.raises(UnrecoverableError, match="exception@7/step on rank 1 failed 3 times"):
        ledger.check()
    assert not issubclass(UnrecoverableError, Exception)  # NVRx's Wrapper must not restart it


def test_a_storage_failure_keeps_its_exit_code_once_its_retries_are_used_up(tmp_path: Path) -> None:
    ledger = FailureLedger(tmp_path, rank=0, max_repeats=2)
    for _ in range(3):
        ledger.record("checkpoint_write", 10)
    with pytest.raises(UnrecoverableError) as info:
        ledger.check()
    assert info.value.cause == "checkpoint_write"
    assert exit_code_for(info.value.cause, 42) == 21
    other = FailureLedger(tmp_path / "other", rank=0, max_repeats=0)
    other.record("exception", 3)
    with pytest.raises(UnrecoverableError) as info:
        other.check()
    assert getattr(info.value, "cause", "unrecoverable") == "unrecoverable"


def test_translate_launcher_exit(tmp_path: Path) -> None:
    assert translate_launcher_exit(0, tmp_path, 42, restarts_exhausted=True)[0] == 0
    code, msg = translate_launcher_exit(1, tmp_path, 42, restarts_exhausted=True)
    assert code == 42 and "restarts exhausted" in msg
    write_exit_status(tmp_path, 10, "exception", "boom", 1)
    assert translate_launcher_exit(1, tmp_path, 42, restarts_exhausted=False) == (10, "exception: boom (rank 1)")
    assert translate_launcher_exit(1, tmp_path, 42, restarts_exhausted=True)[0] == 42
    write_exit_status(tmp_path, 20, "no_usable_checkpoint", "all quarantined", 0)
    assert translate_launcher_exit(1, tmp_path, 42, restarts_exhausted=True)[0] == 20
    # A worker that asked the launcher to stop: its code is the job's, not "restarts exhausted".
    write_exit_status(tmp_path, 21, "checkpoint_write", "ENOSPC, 4 times", 0, final=True)
    assert translate_launcher_exit(1, tmp_path, 42, restarts_exhausted=True) == (
        21,
        "checkpoint_write: ENOSPC, 4 times (rank 0)",
    )


def test_cli_wraps_a_launcher(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "training.resilience.exit_codes",
        "--run-dir",
        str(tmp_path),
        "--unrecoverable",
        "42",
        "--",
    ]
    failing = subprocess.run(
        [*cmd, sys.executable, "-c", "raise SystemExit(1)"],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failing.returncode == 42 and "restarts exhausted" in failing.stderr
    ok = subprocess.run([*cmd, sys.executable, "-c", "pass"], cwd=REPO_ROOT, env=child_env(), timeout=60)
    assert ok.returncode == 0


def test_a_fail_the_job_record_is_never_masked_by_a_peer_error(tmp_path: Path) -> None:
    """Rank 1 escalates (42); rank 0 then fails on the barrier rank 1 left (seen with NVRx 0.4.1): 42 stays."""
    keep = frozenset({2, 20, 42})
    write_exit_status(tmp_path, 42, "unrecoverable", "exception@3/step failed 2 times", 1, keep_codes=keep, final=True)
    write_exit_status(tmp_path, 10, "exception", "BarrierOverflow", 0, keep_codes=keep)
    assert read_exit_status(tmp_path) == {
        "code": 42,
        "cause": "unrecoverable",
        "message": "exception@3/step failed 2 times",
        "rank": 1,
        "final": True,
    }
    (tmp_path / "other").mkdir()
    write_exit_status(tmp_path / "other", 10, "exception", "first", 0)
    write_exit_status(tmp_path / "other", 13, "comm", "second", 1, keep_codes=keep)
    assert read_exit_status(tmp_path / "other")["code"] == 13  # an ordinary record is replaced by the latest
