"""The checkpoint-stall benchmark end to end on CPU workers: one torchrun job per variant, then the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.checkpoint_staging import main
from tests.helpers.training_runs import shared_template
from training.launch.prefork import SOCKET_ENV


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback")
def test_staging_benchmark_measures_each_variant_on_cpu(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun and its workers are forked from the test process's worker template (``SOCKET_ENV`` set)."""
    socket = shared_template()
    monkeypatch.setenv(SOCKET_ENV, socket)
    out = tmp_path / "bench"
    rc = main(["--steps", "8", "--interval", "4", "--variants", "none,sync,async,async:cuda-ipc", "--out", str(out)])
    assert rc == 0
    printed, errors = capfd.readouterr()
    assert "cold start" not in errors  # what a stand-in that found no template would have said
    assert (
        f"-- sync: 8 steps, checkpoint every 4 (torchrun and workers forked from the template at {socket})" in printed
    )
    assert "async:cuda-ipc: skipped (NVRx staging modes need CUDA)" in printed
    results = json.loads((out / "results.json").read_text())
    assert "CPU fallback" in results["device"]
    rows = results["results"]
    assert set(rows) == {"none", "sync", "async"}
    assert rows["none"]["efficiency_vs_none"] == pytest.approx(1.0)
    assert rows["none"].get("saves", 0) == 0
    for name in ("sync", "async"):
        assert rows[name]["saves"] == 2  # steps 4 and 8
        assert len(rows[name]["stalls_s"]) == 2 and all(s >= 0 for s in rows[name]["stalls_s"])
        assert [set(parts) for parts in rows[name]["stall_parts_s"]] == [{"state_dict_s"}] * 2  # CPU: no NVRx parts
        assert rows[name]["efficiency_vs_none"] > 0
    assert rows["async"]["mode"] == "async"
    assert f"| sync | {rows['sync']['steps_per_s']:.2f} |" in printed
    for name in ("none", "sync", "async"):  # each variant's checkpoints were cleared before the next ran
        assert (out / name / "events.jsonl").is_file() and not (out / name / "checkpoints").exists()
