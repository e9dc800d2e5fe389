"""training.train pieces that need no processes: config resolution, restart cause, hooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.common.files import atomic_write_json
from training.train import _ns_of_fault, parse_args, resolve_config


def test_short_timeouts_and_mode_override() -> None:
    args = parse_args(["--run-dir", "/tmp/x", "--mode", "ft-launcher", "--short-timeouts"])
    cfg, mode = resolve_config(args)
    assert mode.value == "ft-launcher"
    assert cfg.inprocess == cfg.local.inprocess and cfg.ft == cfg.local.ft
    assert cfg.job.inprocess_store_port == cfg.local.inprocess_store_port


def test_restart_cause_is_the_newest_fault_since(tmp_path: Path) -> None:
    (tmp_path / "faults").mkdir()
    atomic_write_json(tmp_path / "faults" / "fired.rank0.json", {"exception@3:0/step": 100})
    atomic_write_json(tmp_path / "faults" / "fired.rank1.json", {"hang@9:1/step": 300})
    assert _ns_of_fault(tmp_path, 0) == "hang"
    assert _ns_of_fault(tmp_path, 50) == "hang"
    assert _ns_of_fault(tmp_path, 300) is None


def test_invalid_mode_is_rejected() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--run-dir", "/tmp/x", "--mode", "nope"])
