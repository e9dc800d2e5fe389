"""docs/reliability.md from fault-matrix results: every kind of cell lands in its own table."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.reliability_report import main, render


def _results(cells: list[dict[str, Any]]) -> dict[str, Any]:
    return {"generated_at": "2026-11-30T00:00:00Z", "total_wall_s": 1.0, "cells": cells}


def test_checkpoint_cells_get_their_own_table_and_stay_out_of_the_kind_phase_matrix() -> None:
    cells = [
        {"kind": "exception", "phase": "init", "ok": True, "layer": "inprocess", "recovery_s": 1.0,
         "schedule": "exception@0:1/init", "expected_layer": "inprocess", "outcome": "recovered"},
        {"kind": "storage", "phase": "read-only file system", "ok": True, "outcome": "exit 21: EROFS"},
        {"kind": "checkpoint", "phase": "checkpoint root missing", "ok": False, "outcome": "exit 0 | trained 20"},
    ]  # fmt: skip
    doc = render(_results(cells))
    assert "2/3 cells pass" in doc
    assert "| kind \\ phase | init |" in doc and "| checkpoint |" not in doc
    assert "| read-only file system | PASS | exit 21: EROFS |" in doc
    checkpoint = doc.split("## Checkpoint faults", 1)[1]
    assert "| checkpoint root missing | FAIL | exit 0 / trained 20 |" in checkpoint
    assert "## Storage faults" not in checkpoint


def test_the_matrix_reads_layer_and_the_one_recovery_time(tmp_path) -> None:
    cells = [
        {"kind": "exception", "phase": "init", "ok": True, "layer": "inprocess", "recovery_s": 2.5,
         "schedule": "exception@0:1/init", "expected_layer": "inprocess", "outcome": "recovered"},
        {"kind": "exception", "phase": "checkpoint", "ok": None, "layer": None, "recovery_s": None,
         "schedule": "exception@5:1/checkpoint", "expected_layer": "inprocess", "outcome": "fault did not fire"},
        {"kind": "sigkill", "phase": "init", "ok": False, "layer": "job", "recovery_s": 9.0,
         "schedule": "sigkill@0:1/init", "expected_layer": "ft_launcher", "outcome": "recovered by job"},
    ]  # fmt: skip
    results = {**_results(cells), "runs": {"exception": {"exit": 0, "wall_s": 30.5}}}
    doc = render(results)
    assert "1/3 cells pass" in doc
    assert "| kind \\ phase | init | checkpoint |" in doc
    assert "| exception | PASS (inprocess, 2.5 s) | SKIP (no restart) |" in doc
    assert "| sigkill | FAIL (job, 9.0 s) | - |" in doc
    assert "first new step after the restore" in doc
    assert "| sigkill | init | `sigkill@0:1/init` | ft_launcher | recovered by job |" in doc
    assert doc.endswith("Per-kind runs: exception: exit 0, 30.5 s\n")
    # the CLI: results in, document out; no results is an error that says what to run
    src, out = tmp_path / "r.json", tmp_path / "reliability.md"
    src.write_text(__import__("json").dumps(results))
    assert main(["--results", str(src), "--out", str(out)]) == 0 and out.read_text() == doc
    with pytest.raises(SystemExit) as exc:
        main(["--results", str(tmp_path / "none.json"), "--out", str(out)])
    assert exc.value.code == 2
