"""Storage saves (``training.checkpoint.saves``) on a real one-rank gloo group: a failed async save is reported when
it fails and raised at the next step, not at the next save; the error path's wait for a rank's own write."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter

from tests.helpers.training_runs import single_process_group, tiny_app_state
from training.checkpoint.backends import Backend, InFlight, join_dcp_threads
from training.checkpoint.errors import CheckpointWriteError
from training.checkpoint.files import COMMIT_MARKER, TMP_SUFFIX, list_committed, step_dir_name
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.saves import StorageSaves, wait_own_write
from training.common.terminated import Terminated
from training.telemetry.events import EventLog, read_events


@pytest.fixture(autouse=True)
def _group():
    with single_process_group():
        yield


def test_a_failed_async_write_is_reported_when_it_fails_and_raised_at_the_next_step(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    tmp = root / (step_dir_name(1) + TMP_SUFFIX)
    tmp.mkdir(parents=True)
    for name in ("__0_0.distcp", ".metadata"):  # every write into these hits a real ENOSPC
        (tmp / name).symlink_to("/dev/full")
    mgr = CheckpointManager(root, "async", 3, EventLog(tmp_path, rank=0), 0, 1, collective_timeout_s=10)
    mgr.save(1, tiny_app_state(0))  # staged: the write runs on torch's thread
    flight = mgr.saves._inflight
    assert flight is not None and flight.done.wait(30)  # the write failed ...
    failed = [e for e in read_events(tmp_path) if e["event"] == "ckpt_failed"]
    assert len(failed) == 1 and "ENOSPC" in failed[0]["error"]  # ... and was reported then, by its callback
    with pytest.raises(CheckpointWriteError, match="ENOSPC"):
        mgr.maybe_finalize()  # the next step's poll raises it: no save has to come first
    assert mgr.in_flight is None and list_committed(root) == []
    mgr.close()


def _slow_save(tmp_path: Path, delay_s: float) -> tuple[CheckpointManager, InFlight]:
    """A one-rank async save of step 1 in flight, its write held ``delay_s``."""
    mgr = CheckpointManager(
        tmp_path / "ckpt", "async", 3, EventLog(tmp_path, rank=0), 0, 1, collective_timeout_s=10,
        write_delay_s=delay_s,
    )  # fmt: skip
    mgr.save(1, tiny_app_state(0))
    flight = mgr.saves._inflight
    assert flight is not None
    return mgr, flight


def test_the_error_path_keeps_the_rank_alive_until_its_own_write_commits(tmp_path: Path) -> None:
    """The SIGKILL of 2026-12-04: the error path waited for the write with no sign of life, past the watchdogs."""
    mgr, _ = _slow_save(tmp_path, 1.5)
    pings: list[int] = []
    mgr.saves.close(collective=False, keepalive=(lambda: pings.append(1), 60.0))
    assert pings and [s for s, _ in list_committed(tmp_path / "ckpt")] == [1]
    mgr.close(collective=False)


def test_the_error_path_gives_a_write_up_past_its_bound_and_it_never_commits(tmp_path: Path, capsys) -> None:
    mgr, flight = _slow_save(tmp_path, 4.0)
    mgr.saves.close(collective=False, keepalive=(lambda: None, 0.1))
    assert not flight.done.is_set() and flight.abandoned  # returned with the write still held
    assert "the save of step 1 is given up: its write was still running 0.1 s into" in capsys.readouterr().out
    assert flight.done.wait(30)  # the write ends later ...
    join_dcp_threads()
    assert list_committed(tmp_path / "ckpt") == []  # ... and is not committed
    mgr.close(collective=False)


def test_a_sigterm_during_the_error_path_s_wait_is_raised_once_the_write_is_done(tmp_path: Path) -> None:
    """The launcher SIGTERMs the group when a peer exits first: rank 0, still committing, exited 143 with the save
    lost (2026-12-04, ft-launcher with a 45 s write). The signal handler's exception waits for the write now."""
    flight = InFlight(1, tmp_path / "step.tmp", 0.0)

    def handler(signum: int, frame: object) -> None:
        raise Terminated("SIGTERM (test)")

    previous = signal.signal(signal.SIGUSR2, handler)
    timers = [threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR2)), threading.Timer(1.2, flight.done.set)]
    try:
        for t in timers:
            t.start()
        with pytest.raises(Terminated):
            wait_own_write(flight, (lambda: None, 60.0), 0)
        assert flight.done.is_set()  # raised after the write finished, not when the signal came
    finally:
        for t in timers:
            t.join()
        signal.signal(signal.SIGUSR2, previous)


class _FinishedNvrxWrite(Backend):
    """NVRx's async path as the saves see it, its write already finalized: NVRx's finalize (the per-step agreement
    while it writes) has handed the finished write over, and the commit runs on its thread."""

    name = "nvrx (test)"
    asynchronous = True
    nvrx = SimpleNamespace(last_timings={}, pending=lambda: 0)  # type: ignore[assignment]

    def start(self, flight: InFlight, state_dict: dict, pg: object, write_done) -> None:  # type: ignore[no-untyped-def]
        dcp.save(state_dict, storage_writer=FileSystemWriter(flight.tmp))
        (flight.tmp / (COMMIT_MARKER + ".part")).symlink_to("/dev/full")  # the commit's marker hits ENOSPC
        write_done(flight, None)


def test_a_failed_commit_on_the_nvrx_path_is_raised_at_the_next_step_with_its_cause(tmp_path: Path) -> None:
    """Issue 48, item 4: the save stayed in flight, and the next save waited out the checkpoint section (270 s on
    the cluster) to raise "overdue" instead of ENOSPC."""
    saves = StorageSaves(
        tmp_path / "ckpt", "async", 3, EventLog(tmp_path, rank=0), 0, 1, _FinishedNvrxWrite(0.0), "", None, 10.0
    )
    saves.save(1, tiny_app_state(0))
    flight = saves._inflight
    assert flight is not None and flight.done.wait(30) and flight.error is not None
    with pytest.raises(CheckpointWriteError, match="checkpoint at step 1 failed: ENOSPC"):
        saves.maybe_finalize()
    assert saves.in_flight is None and list_committed(tmp_path / "ckpt") == []
