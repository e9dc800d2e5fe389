"""docs/reliability.md from fault-matrix results: every kind of cell lands in its own table."""

from __future__ import annotations

from typing import Any

from scripts.reliability_report import render


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
