"""The page-locking benchmark's accounting (``benchmarks.host_pinning``): the loop's lost time per phase."""

from __future__ import annotations

import pytest
import torch

from benchmarks.host_pinning import lost_by_phase, main


def test_a_step_s_excess_is_split_over_the_phases_it_overlapped() -> None:
    phases = [("map", 0.0, 1.0), ("register", 1.0, 3.0)]
    # typical step 0.1 s: a 0.5 s step across the boundary (0.25 s in each phase), a 1.1 s step inside register
    steps = [("step", 0.75, 1.25), ("step", 1.5, 2.6), ("step", 3.5, 3.6)]
    lost = lost_by_phase(phases, steps, typical=0.1)
    assert lost == {"map": pytest.approx(0.2), "register": pytest.approx(0.2 + 1.0)}


def test_without_cuda_it_says_there_is_nothing_to_measure(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main([]) == 2
    assert "no CUDA here" in capsys.readouterr().out
