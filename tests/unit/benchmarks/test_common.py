"""Benchmark plumbing: throughput from a run's events, worker selection, number formatting."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.common import call_torchrun, fmt, step_throughput, workers


def _write(run_dir: Path, steps: list[tuple[float, int]]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"event": "step", "ts": ts, "step": s}) for ts, s in steps]
    lines.append(json.dumps({"event": "ckpt_begin", "ts": 99.0, "step": 4}))
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")


def test_step_throughput_skips_warmup(tmp_path: Path) -> None:
    # steps 1-2 are warm-up (slow); steps 3..7 take 0.5 s each -> (7 - 3) / (12.0 - 10.0) = 2 steps/s
    _write(tmp_path, [(0.0, 1), (5.0, 2), (10.0, 3), (10.5, 4), (11.0, 5), (11.5, 6), (12.0, 7)])
    assert step_throughput(tmp_path, warmup=2) == pytest.approx(2.0)


def test_step_throughput_needs_two_steps(tmp_path: Path) -> None:
    _write(tmp_path, [(0.0, 1), (1.0, 2)])
    assert step_throughput(tmp_path, warmup=1) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback description")
def test_workers_on_cpu_says_it_is_the_fallback() -> None:
    n, device = workers(None)
    assert n == 2 and "CPU fallback" in device
    assert workers(3)[0] == 3


def test_fmt() -> None:
    assert fmt(None) == "-"
    assert fmt(0.1234, ".1%") == "12.3%"


def test_a_torchrun_launch_gets_a_tmpdir_of_its_own_removed_after_it(tmp_path: Path) -> None:
    """torchrun never removes its ``torchelastic_*`` directory: a suite left 4 in /tmp (2026-12-04), the benchmarks'
    own launches. A stand-in for torchrun makes one in its TMPDIR and says where that was."""
    where = tmp_path / "where"
    script = (
        "import os, pathlib; d = os.environ['TMPDIR']; pathlib.Path(d, 'torchelastic_x').mkdir(); "
        f"pathlib.Path({str(where)!r}).write_text(d)"
    )
    assert call_torchrun([sys.executable, "-c", script], {}) == 0
    used = Path(where.read_text())
    assert used.name.startswith("torchrun-") and not used.exists()
