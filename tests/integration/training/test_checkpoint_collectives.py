"""Checkpoint collectives under real torchrun processes (gloo): a blocked one ends at its own deadline, and a
blocking NVRx finalize polls (one agreement per poll) until a deadline instead of spinning collectives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.blocked_checkpoint_collective import blocked_restore
from tests.helpers.training_runs import REPO_ROOT, torchrun
from training.checkpoint.nvrx_async import FINALIZE_POLL_S
from training.resilience.exit_codes import classify
from training.telemetry.events import read_events

pytestmark = pytest.mark.integration
NVRX_SCRIPT = REPO_ROOT / "tests" / "helpers" / "nvrx_two_ranks.py"


def test_a_rank_blocked_in_a_restore_collective_leaves_at_the_checkpoint_deadline(tmp_path: Path) -> None:
    """The default group has the timeout it gets on CUDA (20 s locally, above the 8 s hard timeout); the restore's
    collective on the checkpoint group must still end after gloo_timeout_s (3 s), as gloo's own error says."""
    out = blocked_restore(tmp_path / "run")
    assert (out["checkpoint_deadline_s"], out["hard_timeout_s"], out["default_group_timeout_s"]) == (3.0, 8.0, 20.0)
    assert "Timed out waiting 3000ms" in out["error"], out
    assert classify(RuntimeError(out["error"])) == "peer_lost"  # blocked by its peer: not this rank's own fault


def nvrx_wait(run_dir: Path, *, delay_s: float, wait_s: float) -> list[dict]:
    """Run ``nvrx_two_ranks.py``; each rank's outcome of ``wait()``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    torchrun([NVRX_SCRIPT, "--run-dir", run_dir, "--delay-s", delay_s, "--wait-s", wait_s], timeout_s=150)
    return [json.loads((run_dir / f"wait.rank{r}.json").read_text()) for r in (0, 1)]


def test_a_blocking_nvrx_finalize_polls_once_per_interval(tmp_path: Path) -> None:
    """Rank 1's NVRx writer is slowed by 2 s: rank 0 waits for it in one agreement per poll, not in back-to-back
    collectives, and the save commits."""
    rank0, rank1 = nvrx_wait(tmp_path / "run", delay_s=2.0, wait_s=600)
    assert rank0["error"] == rank1["error"] == ""
    assert 1 < rank0["rounds"] <= rank0["wait_s"] / FINALIZE_POLL_S + 2, rank0
    (commit,) = [e for e in read_events(tmp_path / "run") if e["event"] == "ckpt_committed"]
    assert commit["step"] == 1 and commit["backend"].startswith("nvrx.FileSystemWriterAsync")


def test_a_slow_nvrx_write_ends_the_blocking_finalize_at_its_deadline(tmp_path: Path) -> None:
    """The slow-storage fault reaches NVRx's writer: rank 1's write is delayed by 120 s, the wait is bounded by 8 s
    (rank 0's tiny write, handed to a writer already warm, takes well under a second). Both ranks give up at the
    deadline, each saying whether its own write had finished."""
    rank0, rank1 = nvrx_wait(tmp_path / "run", delay_s=120.0, wait_s=8.0)
    expected = "the async checkpoint write did not finish on every rank within 8 s (this rank's writer: {})"
    assert expected.format("finished") in rank0["error"]
    assert expected.format("still writing") in rank1["error"]
