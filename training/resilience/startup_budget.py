"""How long a worker takes from its start to its first heartbeat, estimated from the config, and a check that the
timeouts watching that stretch leave room for it.

A new worker (a fresh pod, an in-job restart) sets up, restores the newest checkpoint, then runs its first step
before it sends its first heartbeat. ft_launcher kills it when ``ft.initial_rank_heartbeat_timeout_s`` or the
``setup`` section timeout (``ft.section_timeouts_s["setup"]``, which covers setup and restore) runs out first: a
timeout shorter than that stretch turns every restart of a large model into another restart. The estimate:

* setup = ``SETUP_BASE_S`` + ``SETUP_S_PER_BILLION`` x billions of parameters (imports, CUDA and NCCL, building and
  sharding the model);
* restore = 2 x checkpoint bytes / the file system's read throughput (the load, then the verification that hashes
  every byte once more); FSx for Lustre SCRATCH_2 gives ``FSX_SCRATCH2_MBPS_PER_TIB`` MB/s per TiB of capacity
  (its baseline; bursts are faster, but a restart of every node reads at once);
* first step = ``FIRST_STEP_S``;

times ``SAFETY``. The constants are deliberately round: the check catches timeouts that are off by a factor (the
default 120 s against minutes of restore for Llama 3.1 8B), not by seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from training.model.shapes import DEFAULT_VOCAB, MODEL_SIZES, checkpoint_bytes, param_count

SETUP_BASE_S = 20.0
SETUP_S_PER_BILLION = 10.0
FIRST_STEP_S = 10.0
#: FSx for Lustre SCRATCH_2 baseline throughput (AWS: 200 MB/s per TiB of storage).
FSX_SCRATCH2_MBPS_PER_TIB = 200.0
SAFETY = 1.5


@dataclass(frozen=True)
class StartupEstimate:
    setup_s: float
    restore_s: float
    first_step_s: float
    checkpoint_bytes: int
    read_mb_s: float

    @property
    def total_s(self) -> float:
        return self.setup_s + self.restore_s + self.first_step_s

    @property
    def required_s(self) -> float:
        return SAFETY * self.total_s

    def describe(self) -> str:
        return (
            f"setup {self.setup_s:.0f} s + restore {self.restore_s:.0f} s (2 x {self.checkpoint_bytes / 1e9:.1f} GB at "
            f"{self.read_mb_s:.0f} MB/s) + first step {self.first_step_s:.0f} s = {self.total_s:.0f} s, "
            f"x {SAFETY} = {self.required_s:.0f} s"
        )


def estimate(cfg: Any) -> StartupEstimate:
    """The start-to-first-heartbeat estimate of ``cfg``'s model (``model.size``) on its FSx file system."""
    size = cfg.model.size
    params = param_count(MODEL_SIZES[size], DEFAULT_VOCAB[size])
    read_mb_s = FSX_SCRATCH2_MBPS_PER_TIB * cfg.storage.fsx_capacity_gib / 1024
    nbytes = checkpoint_bytes(size)
    return StartupEstimate(
        setup_s=SETUP_BASE_S + SETUP_S_PER_BILLION * params / 1e9,
        restore_s=2 * nbytes / (read_mb_s * 1e6),
        first_step_s=FIRST_STEP_S,
        checkpoint_bytes=nbytes,
        read_mb_s=read_mb_s,
    )


def problems(cfg: Any) -> list[str]:
    """One line per timeout shorter than the estimate, naming the field (empty: the timeouts fit)."""
    est = estimate(cfg)
    fields = {
        "ft.initial_rank_heartbeat_timeout_s": cfg.ft.initial_rank_heartbeat_timeout_s,
        'ft.section_timeouts_s["setup"]': cfg.ft.section_timeouts_s["setup"],
    }
    return [
        f"{name} = {value:g} s is shorter than a new worker's start for model.size {cfg.model.size!r}: "
        f"{est.describe()}; raise it to at least {est.required_s:.0f} s"
        for name, value in fields.items()
        if value < est.required_s
    ]
