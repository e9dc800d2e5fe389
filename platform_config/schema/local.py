"""The local CPU run (``local``): short timeouts, scaled on CUDA."""

from __future__ import annotations

from pydantic import Field, model_validator

from platform_config.schema.base import _Strict
from platform_config.schema.job import RendezvousConfig
from platform_config.schema.resilience import FtLauncherConfig, InprocessConfig


class LocalConfig(_Strict):
    """The local CPU run (``python -m training.local``, ``make demo``)."""

    nproc: int = Field(default=2, ge=1, le=8)
    steps: int = Field(default=160, ge=1)
    #: Default schedule of the demo: one fault per layer (exception/comm/hang -> in-process, sigkill -> ft_launcher).
    faults: str = "exception@40:1,hang@70:0,sigkill@110:1"
    rendezvous_port: int = Field(default=29700, ge=1024, le=65535)
    #: In-process store port of local runs (must differ from rendezvous_port).
    inprocess_store_port: int = Field(default=29750, ge=1024, le=65535)
    #: Local CPU runs replace ``inprocess`` with these short timeouts (a hang is detected in seconds, not minutes).
    inprocess: InprocessConfig = Field(
        default_factory=lambda: InprocessConfig(
            soft_timeout_s=4.0,
            hard_timeout_s=8.0,
            heartbeat_interval_s=1.0,
            heartbeat_timeout_s=6.0,
            barrier_timeout_s=20.0,
            completion_timeout_s=20.0,
            gloo_timeout_s=3.0,
            monitor_thread_interval_s=0.5,
            monitor_process_interval_s=0.05,
            progress_watchdog_interval_s=0.5,
            step_timeout_floor_s=2.0,
            last_call_wait_s=0.1,
            termination_grace_s=2.0,
        )
    )
    #: Local CPU runs replace ``ft`` with these (short heartbeat timeouts, fast liveness checks).
    ft: FtLauncherConfig = Field(
        default_factory=lambda: FtLauncherConfig(
            initial_rank_heartbeat_timeout_s=60.0,
            rank_heartbeat_timeout_s=15.0,
            section_timeouts_s={"setup": 60.0, "step": 15.0, "checkpoint": 30.0},
            rank_out_of_section_timeout_s=30.0,
            max_restarts=3,
            monitor_interval_s=0.2,
        )
    )

    #: Local multi-node runs (``--nodes``) replace ``job.rendezvous`` with these: a lost rendezvous host is noticed
    #: within seconds, and a run whose replacement never comes ends within two minutes.
    rendezvous: RendezvousConfig = Field(
        default_factory=lambda: RendezvousConfig(join_timeout_s=120.0, read_timeout_s=10.0, close_timeout_s=10.0)
    )

    #: On CUDA every local timeout is multiplied by this: CUDA/NCCL setup and the NVRx async-checkpoint worker's
    #: first save (a spawned process) block the main thread for seconds (measured 4-6 s on an H200), which the
    #: CPU timeouts would misread as a hang. Scaling keeps the soft < hard < barrier ordering, and the checkpoint
    #: group's gloo deadline below the hard timeout: the ranks' first saves end seconds apart (their writers opened
    #: the CUDA IPC handles after 4.35 and 6.69 s on 2 x H200), which the unscaled 3 s turned into a spurious restart.
    cuda_timeout_scale: float = Field(default=2.5, ge=1.0)

    @model_validator(mode="after")
    def _ports(self) -> LocalConfig:
        if self.inprocess_store_port == self.rendezvous_port:
            raise ValueError("local.inprocess_store_port must differ from local.rendezvous_port")
        return self

    def timeouts(self, cuda: bool) -> tuple[InprocessConfig, FtLauncherConfig]:
        """The local in-process and ft_launcher settings, scaled by ``cuda_timeout_scale`` on CUDA."""
        if not cuda:
            return self.inprocess, self.ft
        k = self.cuda_timeout_scale
        ip = self.inprocess.model_copy(
            update={
                f: getattr(self.inprocess, f) * k
                for f in (
                    "soft_timeout_s",
                    "hard_timeout_s",
                    "heartbeat_timeout_s",
                    "barrier_timeout_s",
                    "completion_timeout_s",
                    "gloo_timeout_s",
                )
            }
        )
        ft = self.ft.model_copy(
            update={
                "initial_rank_heartbeat_timeout_s": self.ft.initial_rank_heartbeat_timeout_s * k,
                "rank_heartbeat_timeout_s": self.ft.rank_heartbeat_timeout_s * k,
                "rank_out_of_section_timeout_s": self.ft.rank_out_of_section_timeout_s * k,
                "section_timeouts_s": {n: t * k for n, t in self.ft.section_timeouts_s.items()},
            }
        )
        return ip, ft
