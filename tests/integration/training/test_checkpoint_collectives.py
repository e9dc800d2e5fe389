"""Checkpoint collectives under real torchrun processes (gloo): a blocking NVRx finalize polls (one agreement per
poll) until a deadline instead of spinning collectives. That a blocked restore collective ends at its own deadline is
checked on the fault matrix's run of it (test_fault_matrix.py, its "blocked checkpoint collective" cell)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.training_runs import REPO_ROOT, torchrun
from training.checkpoint.nvrx_async import FINALIZE_POLL_S
from training.telemetry.events import read_events

pytestmark = pytest.mark.integration
NVRX_SCRIPT = REPO_ROOT / "tests" / "helpers" / "nvrx_two_ranks.py"


#: The NVRx rounds of one launch (rank 1's write delay, the wait's bound): a 2 s slow write waited for without a
#: deadline, then a 120 s slow one that an 8 s deadline ends.
POLLED, DEADLINE = (2.0, 600.0), (120.0, 8.0)


@pytest.fixture(scope="module")
def nvrx_waits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[dict]]]:
    """One ``nvrx_two_ranks.py`` launch for the NVRx tests: its run directory, and per round each rank's outcome of
    ``wait()``. Round 1 (:data:`POLLED`) saves step 1; round 2 (:data:`DEADLINE`) saves step 2 on the writer that is
    warm by then, as in a run's later saves."""
    run_dir = tmp_path_factory.mktemp("nvrx") / "run"
    run_dir.mkdir(parents=True)
    rounds = [f"{delay_s}:{wait_s}" for delay_s, wait_s in (POLLED, DEADLINE)]
    torchrun([NVRX_SCRIPT, "--run-dir", run_dir, *(a for r in rounds for a in ("--round", r))], timeout_s=150)
    outcomes = [[json.loads((run_dir / f"wait.{i}.rank{r}.json").read_text()) for r in (0, 1)] for i in (1, 2)]
    return run_dir, outcomes


def test_a_blocking_nvrx_finalize_polls_once_per_interval(nvrx_waits: tuple[Path, list[list[dict]]]) -> None:
    """Rank 1's NVRx writer is slowed by 2 s: rank 0 waits for it in one agreement per poll, not in back-to-back
    collectives, and the save commits."""
    run_dir, ((rank0, rank1), _) = nvrx_waits
    assert rank0["error"] == rank1["error"] == ""
    assert 1 < rank0["rounds"] <= rank0["wait_s"] / FINALIZE_POLL_S + 2, rank0
    (commit,) = [e for e in read_events(run_dir) if e["event"] == "ckpt_committed"]  # round 2's never commits
    assert commit["step"] == 1 and commit["backend"].startswith("nvrx.FileSystemWriterAsync")


def test_a_slow_nvrx_write_ends_the_blocking_finalize_at_its_deadline(
    nvrx_waits: tuple[Path, list[list[dict]]],
) -> None:
    """The slow-storage fault reaches NVRx's writer: rank 1's write is delayed by 120 s, the wait is bounded by 8 s
    (rank 0's tiny write, handed to a writer already warm, takes well under a second). Both ranks give up at the
    deadline, each saying whether its own write had finished."""
    _, (_, (rank0, rank1)) = nvrx_waits
    expected = "the async checkpoint write did not finish on every rank within 8 s (this rank's writer: {})"
    assert expected.format("finished") in rank0["error"]
    assert expected.format("still writing") in rank1["error"]


SKEW_SCRIPT = REPO_ROOT / "tests" / "helpers" / "skewed_ranks.py"


def test_ranks_seconds_apart_in_bulk_checkpoint_io_are_not_a_failure(tmp_path: Path) -> None:
    """Issue 48, item 3: the collectives right after each rank's own writing, hashing or reading ran on the checkpoint
    group's short deadline, so ranks more than that apart (a slower FSx client, a bigger shard) failed every save and
    restore as a lost peer, and nothing reached the ledger. Rank 1's I/O here ends 4 s after rank 0's, past the 2 s
    deadline: the ranks wait for each other at a barrier with the long deadline, rank 0 keeping itself alive."""
    torchrun([SKEW_SCRIPT, tmp_path], timeout_s=150)
    rank0, rank1 = (json.loads((tmp_path / f"result.rank{r}.json").read_text()) for r in (0, 1))
    for result in (rank0, rank1):
        assert "error" not in result, result
        assert (result["saved"], result["restored"], result["same_state"]) == (2, 2, True)
    assert rank0["pings"] >= 4  # three waits of about 4 s, pinged every 0.5 s
    # A skew past the long deadline (4 s against 3 s) is a storage fault that reaches the ledger, not a lost peer
    assert rank0["past_deadline"]["cause"] == "checkpoint_write", rank0
    error = rank0["past_deadline"]["error"]
    assert "left the checkpoint barrier after its own hashing " in error and "s in (deadline 3 s)" in error, rank0
