"""The recovery layers and fault injection (``inprocess``, ``ft``, ``faults``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from platform_config.schema.base import _Strict


class InprocessConfig(_Strict):
    """NVRx in-process restart timeouts (soft < hard < barrier, enforced)."""

    soft_timeout_s: float = Field(default=20.0, gt=0)
    hard_timeout_s: float = Field(default=30.0, gt=0)
    heartbeat_interval_s: float = Field(default=2.0, gt=0)
    heartbeat_timeout_s: float = Field(default=30.0, gt=0)
    barrier_timeout_s: float = Field(default=60.0, gt=0)
    completion_timeout_s: float = Field(default=60.0, gt=0)
    #: In-process restarts allowed within ``restart_window_s`` (a sliding window, so a long run with rare faults
    #: never runs out). Beyond it the in-process layer gives up on this fault and the next layer takes over
    #: (ft_launcher, or the pod's end under torchrun), never failing the Job by itself.
    max_iterations: int = Field(default=8, ge=1)
    restart_window_s: float = Field(default=3600.0, gt=0)
    #: Smallest world the in-process layer may continue with after ranks are lost. None = the full world: a lost
    #: rank (a dead pod) ends the iteration on every survivor with PEER_LOST, and the pods rejoin at full size once
    #: the lost one is replaced, so the run stays bitwise what a fault-free run computes. A smaller value lets the
    #: survivors go on with fewer ranks (a different global batch; the checkpoint loader reshards).
    min_world_size: int | None = Field(default=None, ge=1)
    #: Deadline of gloo collectives: the checkpoint group's on every device, the default group's on CPU. Below
    #: hard_timeout_s (NVRx cannot abort gloo).
    gloo_timeout_s: float = Field(default=10.0, gt=0)
    #: NVRx's monitor thread (in the worker): how often it re-arms its wait for an interruption record in the store.
    #: The wait returns as soon as a record appears, so this does not delay detection.
    monitor_thread_interval_s: float = Field(default=1.0, gt=0)
    #: NVRx's monitor process: how often it checks the progress timestamps against the soft and hard timeouts. It
    #: skips that check after every timestamp message it receives (docs/nvrx-monitor.md), so it must be well below
    #: ``progress_watchdog_interval_s`` (at most half of it, enforced), or the checks run rarely and a hang is caught
    #: many seconds after the soft timeout.
    monitor_process_interval_s: float = Field(default=0.1, gt=0)
    #: NVRx's progress watchdog: how often it samples the main thread's automatic progress timestamp and sends it to
    #: the monitor process (one message each time).
    progress_watchdog_interval_s: float = Field(default=1.0, gt=0)
    #: The soft timeout of a training step is derived from the measured step time (the longest gap between two
    #: step pings of the last ``training.resilience.hang.WINDOW`` steps) times this factor, at least
    #: ``step_timeout_floor_s`` and at most ``soft_timeout_s`` (the ceiling). The hard timeout moves with it: it stays
    #: ``hard_timeout_s - soft_timeout_s`` after the derived soft timeout.
    step_timeout_factor: float = Field(default=10.0, ge=1.0)
    #: Lower bound of the derived step soft timeout: a slow step (a first step after a restart, a step competing with a
    #: background checkpoint write) must not look like a hang. Set-up, restore and checkpoints are not measured against
    #: it; they keep ``soft_timeout_s``.
    step_timeout_floor_s: float = Field(default=3.0, gt=0)
    #: Wait for other ranks to report concurrent faults before restarting (on every in-process restart's path).
    last_call_wait_s: float = Field(default=0.2, gt=0)
    #: SIGTERM -> SIGKILL grace used by the hard timeout.
    termination_grace_s: float = Field(default=5.0, gt=0)
    #: FaultCounter: faults one rank may have before it is excluded (None = unlimited).
    max_rank_faults: int | None = Field(default=None, ge=1)
    #: How a fault's process groups are torn down, always on a thread of its own (NCCL's abort takes about a second).
    #: ``detached``: they are taken out of torch's registry at once and aborted beside the next iteration, which
    #: creates its group without waiting (training.parallel.detached_groups). ``in_place``: NVRx's own
    #: ``AbortTorchDistributed``; the next iteration waits for it before its group. A torch whose registry lacks what
    #: ``detached`` needs gets ``in_place``, with a line saying so.
    abort: Literal["detached", "in_place"] = "detached"

    @model_validator(mode="after")
    def _order(self) -> InprocessConfig:
        if not self.soft_timeout_s < self.hard_timeout_s < self.barrier_timeout_s:
            raise ValueError(
                "NVRx needs soft_timeout_s < hard_timeout_s < barrier_timeout_s, got "
                f"{self.soft_timeout_s} / {self.hard_timeout_s} / {self.barrier_timeout_s}"
            )
        if self.gloo_timeout_s >= self.hard_timeout_s:
            raise ValueError(
                f"gloo_timeout_s ({self.gloo_timeout_s}) must be below hard_timeout_s ({self.hard_timeout_s}): NVRx "
                "cannot abort a gloo collective (the checkpoint group's, and every group's on CPU), so a rank blocked "
                "in one must leave it before the hard timeout kills the process"
            )
        if self.heartbeat_interval_s >= self.heartbeat_timeout_s:
            raise ValueError("heartbeat_interval_s must be below heartbeat_timeout_s")
        if self.heartbeat_timeout_s >= self.barrier_timeout_s:
            raise ValueError("NVRx needs heartbeat_timeout_s < barrier_timeout_s")
        for name in ("monitor_thread_interval_s", "monitor_process_interval_s", "progress_watchdog_interval_s"):
            if getattr(self, name) >= min(self.soft_timeout_s, self.heartbeat_timeout_s):
                raise ValueError(f"{name} must be below soft_timeout_s and heartbeat_timeout_s")
        if 2 * self.monitor_process_interval_s > self.progress_watchdog_interval_s:
            raise ValueError(
                f"monitor_process_interval_s ({self.monitor_process_interval_s}) must be at most half of "
                f"progress_watchdog_interval_s ({self.progress_watchdog_interval_s}): NVRx's monitor process skips its "
                "timeout checks after every progress message, so with similar intervals it checks only now and then "
                "and a hang is caught long after the soft timeout (docs/nvrx-monitor.md)"
            )
        if self.step_timeout_floor_s > self.soft_timeout_s:
            raise ValueError(
                f"step_timeout_floor_s ({self.step_timeout_floor_s}) must not exceed soft_timeout_s "
                f"({self.soft_timeout_s}), the ceiling of the derived step timeout"
            )
        return self


class FtLauncherConfig(_Strict):
    """NVRx fault-tolerance launcher (ft_launcher) settings."""

    initial_rank_heartbeat_timeout_s: float = Field(default=120.0, gt=0)
    rank_heartbeat_timeout_s: float = Field(default=60.0, gt=0)
    section_timeouts_s: dict[str, float] = Field(
        default_factory=lambda: {"setup": 300.0, "step": 120.0, "checkpoint": 300.0}
    )
    rank_out_of_section_timeout_s: float = Field(default=300.0, gt=0)
    max_restarts: int = Field(default=5, ge=0)
    #: Seconds between the launcher's worker-liveness checks (how fast a killed worker is noticed).
    monitor_interval_s: float = Field(default=0.5, gt=0)
    #: NVRx 0.7.0 and later: after stopping a failed worker group, ft_launcher waits until every GPU's memory is
    #: freed before the next rendezvous, checking at this interval (NVRx's default is 2 s). On the 1B run on one H100
    #: stopping the workers and that wait took 3.0 and 4.3 s of a SIGKILL's recovery, with the memory samples 2 s
    #: apart (docs/benchmarks.md). Earlier releases have no such wait and ignore the setting.
    gpu_memory_poll_interval_s: float = Field(default=0.1, gt=0)
    #: Let NVRx compute heartbeat/section timeouts from observed times (at checkpoints); they are then
    #: stored in the checkpoint. Off = the configured values above are used as they are.
    calculate_timeouts: bool = False
    #: Exit code meaning "retries exhausted / unrecoverable": the Job fails at once, no pod restart.
    unrecoverable_exit_code: int = Field(default=42, ge=1, le=255)

    @field_validator("section_timeouts_s")
    @classmethod
    def _sections(cls, v: dict[str, float]) -> dict[str, float]:
        missing = {"setup", "step", "checkpoint"} - set(v)
        if missing:
            raise ValueError(f"needs sections setup, step and checkpoint; missing {sorted(missing)}")
        if any(t <= 0 for t in v.values()):
            raise ValueError("section timeouts must be positive")
        return v


class RandomFaults(_Strict):
    """Seeded random fault schedule."""

    count: int = Field(default=0, ge=0)
    kinds: list[Literal["exception", "hang", "sigkill", "oom", "comm"]] = Field(
        default_factory=lambda: ["exception", "sigkill"]
    )
    weights: list[float] | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _weights(self) -> RandomFaults:
        if self.weights is not None and len(self.weights) != len(self.kinds):
            raise ValueError(f"weights has {len(self.weights)} entries but kinds has {len(self.kinds)}")
        return self


#: ``kind@step[:rank][/phase][!]``; ``!`` = sticky (fires again after every recovery: a deterministic bug).
_FAULT_RE = re.compile(r"^(exception|hang|sigkill|oom|comm)@\d+(:\d+)?(/(init|step|checkpoint|restore|eval))?!?$")


class FaultConfig(_Strict):
    """Fault injection: an explicit ``kind@step[:rank][/phase][!]`` schedule and/or seeded random faults."""

    schedule: str = ""
    random: RandomFaults = Field(default_factory=RandomFaults)
    #: Same fault (kind, step, rank) seen this many times escalates to the unrecoverable exit.
    max_repeats: int = Field(default=3, ge=1)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        for item in filter(None, (s.strip() for s in v.split(","))):
            if not _FAULT_RE.match(item):
                raise ValueError(
                    f"bad entry {item!r}; expected kind@step[:rank][/phase][!] with kind in "
                    "exception|hang|sigkill|oom|comm and phase in init|step|checkpoint|restore|eval"
                )
        return v
