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

import math
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


#: A local run's start (``training.local``: this machine's disk, no FSx): CUDA context and NCCL set-up, then per
#: billion parameters building and sharding the model; the first step; the restore reads from local disk at
#: ``LOCAL_READ_GB_S`` (the commit hashes every byte once more: twice the bytes, as on FSx). The 1B model's set-up
#: was measured at 10.45 s on 1 x H100 (CUDA base 5 s + 6 s per billion: 10.8 s), the tiny model's at 4-6 s on
#: 2 x H200 (5 s); on the CPU the tiny model sets up in about a second.
LOCAL_SETUP_BASE_S = {"cuda": 5.0, "cpu": 1.0}
LOCAL_SETUP_S_PER_BILLION = 6.0
LOCAL_FIRST_STEP_BASE_S = {"cuda": 1.0, "cpu": 0.5}
LOCAL_FIRST_STEP_S_PER_BILLION = 2.0
LOCAL_READ_GB_S = 2.0


def local_estimate(size: str, *, cuda: bool, measured_init_s: float | None = None) -> StartupEstimate:
    """A local worker's start to its first heartbeat for model ``size`` (a set-up measured by an earlier launch of
    the same run, when known and longer, replaces the estimated one)."""
    billions = param_count(MODEL_SIZES[size], DEFAULT_VOCAB[size]) / 1e9
    device = "cuda" if cuda else "cpu"
    nbytes = checkpoint_bytes(size)
    setup = LOCAL_SETUP_BASE_S[device] + LOCAL_SETUP_S_PER_BILLION * billions
    return StartupEstimate(
        setup_s=max(setup, measured_init_s or 0.0),
        restore_s=2 * nbytes / (LOCAL_READ_GB_S * 1e9),
        first_step_s=LOCAL_FIRST_STEP_BASE_S[device] + LOCAL_FIRST_STEP_S_PER_BILLION * billions,
        checkpoint_bytes=nbytes,
        read_mb_s=LOCAL_READ_GB_S * 1e3,
    )


#: The in-process timeouts that move together when the soft timeout is raised (their gaps, and so NVRx's
#: soft < hard < barrier ordering, stay as configured).
_INPROCESS_SHIFTED = ("soft_timeout_s", "hard_timeout_s", "barrier_timeout_s", "completion_timeout_s")


def _raise_inprocess(inprocess: Any, need_s: float) -> tuple[Any, bool]:
    """``inprocess`` with its soft timeout raised to ``need_s`` if shorter, hard, barrier and completion moved by the
    same amount (their gaps, and so NVRx's soft < hard < barrier ordering, stay as configured); whether it moved."""
    if inprocess.soft_timeout_s >= need_s:
        return inprocess, False
    delta = need_s - inprocess.soft_timeout_s
    return inprocess.model_copy(update={f: round(getattr(inprocess, f) + delta, 1) for f in _INPROCESS_SHIFTED}), True


def _raise_ft_start(ft: Any, need_s: float) -> tuple[Any, bool]:
    """``ft`` with its first-heartbeat and setup-section timeouts raised to ``need_s`` where shorter; whether any
    moved."""
    raised: dict[str, Any] = {}
    if ft.initial_rank_heartbeat_timeout_s < need_s:
        raised["initial_rank_heartbeat_timeout_s"] = need_s
    if ft.section_timeouts_s["setup"] < need_s:
        raised["section_timeouts_s"] = {**ft.section_timeouts_s, "setup": need_s}
    return (ft.model_copy(update=raised), True) if raised else (ft, False)


def _inprocess_line(inprocess: Any, why: str) -> str:
    return (
        f"inprocess.soft_timeout_s raised to {inprocess.soft_timeout_s:g} s (hard {inprocess.hard_timeout_s:g}, "
        f"barrier {inprocess.barrier_timeout_s:g}): {why}"
    )


def fit_local_timeouts(cfg: Any, inprocess: Any, ft: Any, est: StartupEstimate) -> tuple[Any, Any, list[str]]:
    """``inprocess`` and ``ft`` (a local run's, :meth:`LocalConfig.timeouts`) with every budget that watches a
    worker's start raised to the estimate ``est`` where it is shorter (a budget that would fire on healthy progress
    is raised, not refused); the lines saying what was derived and raised. A step's hang budget is not among them:
    it stays derived from the measured step times (``training/resilience/hang.py``), with the soft timeout as its
    ceiling."""
    need = round(est.required_s, 1)
    lines = [f"start-up budget for model.size {cfg.model.size!r}: {est.describe()}"]
    inprocess, moved = _raise_inprocess(inprocess, need)
    if moved:
        why = "set-up and restore are watched by it; a step's hang budget stays derived from the step times"
        lines.append(_inprocess_line(inprocess, why))
    ft, moved = _raise_ft_start(ft, need)
    if moved:
        lines.append(f"ft_launcher's first-heartbeat and setup-section timeouts raised to {need:g} s")
    return inprocess, ft, lines


#: Set by ``training.local`` for its workers: the set-up time an earlier launch of the same run measured.
MEASURED_INIT_ENV = "TRAINING_MEASURED_INIT_S"


def local_timeouts(cfg: Any, *, cuda: bool, measured_init_s: float | None = None) -> tuple[Any, Any, list[str]]:
    """A local run's in-process and ft_launcher settings (``cfg.local``'s, scaled on CUDA), fitted to the start of
    ``cfg.model.size`` (:func:`fit_local_timeouts`); the lines saying what was derived."""
    inprocess, ft = cfg.local.timeouts(cuda=cuda)
    est = local_estimate(cfg.model.size, cuda=cuda, measured_init_s=measured_init_s)
    return fit_local_timeouts(cfg, inprocess, ft, est)


def fit_cluster_timeouts(cfg: Any) -> tuple[Any, list[str]]:
    """``cfg`` with the timeouts that watch a new worker on the cluster raised where the model's start would outlast
    them, and a line for each raise: ft_launcher's first-heartbeat and setup-section timeouts to the whole start
    (:func:`estimate`), the in-process soft timeout (hard, barrier and completion with it) to 1.5 x set-up + first
    step, which it watches (:func:`local_estimate` on CUDA). ``make synth`` applies it, so a model size runs with
    the project's defaults; a step's hang budget stays derived from step times."""
    est = estimate(cfg)
    lines: list[str] = []
    ft, moved = _raise_ft_start(cfg.ft, float(math.ceil(est.required_s)))
    if moved:
        lines.append(
            f'ft.initial_rank_heartbeat_timeout_s and ft.section_timeouts_s["setup"] raised to at least '
            f"{math.ceil(est.required_s)} s: a new worker's start for model.size {cfg.model.size!r} is {est.describe()}"
        )
    # what the in-process soft timeout watches, set-up and the first step, from the set-up measured on the GPU
    # (local_estimate's constants) rather than the ft_launcher estimate's deliberately round ones
    dev = local_estimate(cfg.model.size, cuda=True)
    inprocess, moved = _raise_inprocess(cfg.inprocess, float(math.ceil(SAFETY * (dev.setup_s + dev.first_step_s))))
    if moved:
        why = (
            f"a new worker of model.size {cfg.model.size!r} sets up in about {dev.setup_s:.0f} s and runs its first "
            f"step in {dev.first_step_s:.0f} s, x {SAFETY}"
        )
        lines.append(_inprocess_line(inprocess, why))
    return cfg.model_copy(update={"ft": ft, "inprocess": inprocess}), lines
