"""Throughput and model-FLOPs utilisation (MFU) of training steps."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

#: Dense bf16 peak FLOP/s per accelerator, matched by substring of ``torch.cuda.get_device_name()``.
PEAK_FLOPS: dict[str, float] = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10G": 125e12}


def peak_flops_per_device(device: torch.device) -> float | None:
    """Peak FLOP/s of one device, or None (CPU or an unknown GPU: MFU is then reported as null)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)


def mfu(tokens_per_s: float, flops_per_token: float, world_size: int, peak_per_device: float | None) -> float | None:
    """Achieved FLOP/s over the peak of all devices; None when the peak is unknown."""
    if peak_per_device is None or tokens_per_s <= 0:
        return None
    return tokens_per_s * flops_per_token / (peak_per_device * world_size)


@dataclass
class StepTimer:
    """Times steps and turns a step's global token count into tokens/s and MFU."""

    flops_per_token: float
    world_size: int
    peak_per_device: float | None
    _t0: float = field(default=0.0, init=False)

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self, tokens: int) -> dict[str, float | None]:
        """Fields for the ``step`` event: ``step_s``, ``tokens_per_s``, ``mfu``."""
        step_s = max(time.perf_counter() - self._t0, 1e-9)
        tps = tokens / step_s
        return {
            "step_s": round(step_s, 6),
            "tokens_per_s": round(tps, 1),
            "mfu": mfu(tps, self.flops_per_token, self.world_size, self.peak_per_device),
        }
