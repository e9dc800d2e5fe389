"""Storage saves (``training.checkpoint.saves``) on a real one-rank gloo group: a failed async save is reported when
it fails and raised at the next step, not at the next save."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.training_runs import single_process_group, tiny_app_state
from training.checkpoint.errors import CheckpointWriteError
from training.checkpoint.files import TMP_SUFFIX, list_committed, step_dir_name
from training.checkpoint.manager import CheckpointManager
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
