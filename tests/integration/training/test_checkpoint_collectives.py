"""Checkpoint collectives under real torchrun processes (gloo): a blocked one ends at its own deadline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.training_runs import REPO_ROOT, torchrun
from training.resilience.exit_codes import classify

pytestmark = pytest.mark.integration
SCRIPT = REPO_ROOT / "tests" / "helpers" / "blocked_checkpoint_collective.py"


def blocked_restore(run_dir: Path) -> dict:
    """Run the two-rank script; rank 0's outcome (see ``blocked_checkpoint_collective.py``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    torchrun([SCRIPT, "--run-dir", run_dir], nproc=2, timeout_s=150)
    return json.loads((run_dir / "blocked.json").read_text())


def test_a_rank_blocked_in_a_restore_collective_leaves_at_the_checkpoint_deadline(tmp_path: Path) -> None:
    """The default group has the timeout it gets on CUDA (20 s locally, above the 8 s hard timeout); the restore's
    collective on the checkpoint group must still end after gloo_timeout_s (3 s), as gloo's own error says."""
    out = blocked_restore(tmp_path / "run")
    assert (out["checkpoint_deadline_s"], out["hard_timeout_s"], out["default_group_timeout_s"]) == (3.0, 8.0, 20.0)
    assert "Timed out waiting 3000ms" in out["error"], out
    assert classify(RuntimeError(out["error"])) == "hang"
