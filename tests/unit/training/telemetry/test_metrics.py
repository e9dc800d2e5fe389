"""Throughput and MFU accounting."""

from __future__ import annotations

import pytest
import torch

from training.telemetry.metrics import PEAK_FLOPS, StepTimer, mfu, peak_flops_per_device


def test_mfu_is_null_on_cpu_and_for_unknown_peak() -> None:
    assert peak_flops_per_device(torch.device("cpu")) is None
    assert mfu(1e6, 1e9, 2, None) is None


def test_mfu_against_h100_peak() -> None:
    # 8 GPUs at 1e5 tokens/s x 6e9 FLOPs/token = 6e14 FLOP/s over 8 x 989e12 peak.
    assert mfu(1e5, 6e9, 8, PEAK_FLOPS["H100"]) == pytest.approx(6e14 / (8 * 989e12))


def test_step_timer_reports_step_fields() -> None:
    timer = StepTimer(flops_per_token=1e6, world_size=2, peak_per_device=None)
    timer.start()
    fields = timer.stop(tokens=1024)
    assert set(fields) == {"step_s", "tokens_per_s", "mfu"}
    assert fields["step_s"] > 0 and fields["tokens_per_s"] > 0 and fields["mfu"] is None
