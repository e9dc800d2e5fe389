"""The restore-verification benchmark end to end: two gloo workers write, commit and verify a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.restore_verify import main
from tests.helpers.training_runs import shared_template
from training.launch.prefork import SOCKET_ENV


def test_restore_verify_times_both_ways_on_two_ranks(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun and its workers are forked from the test process's worker template (``SOCKET_ENV`` set)."""
    socket = shared_template()
    monkeypatch.setenv(SOCKET_ENV, socket)
    out = tmp_path / "bench"
    assert main(["--gb", "0.02", "--repeats", "2", "--out", str(out)]) == 0
    printed, errors = capfd.readouterr()
    assert "cold start" not in errors  # what a stand-in that found no template would have said
    assert f"2 ranks (gloo, host only) (torchrun and workers forked from the template at {socket})" in printed
    times = json.loads((out / "times.json").read_text())
    assert set(times) == {"rank 0 alone", "shared by all ranks"}
    assert all(len(runs) == 2 and all(t > 0 for t in runs) for runs in times.values())
    assert "| rank 0 alone |" in printed and "| shared by all ranks |" in printed
    assert not (out / "step_00000001").exists()  # the checkpoint is removed afterwards
