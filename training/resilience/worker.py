"""The resilience side of one worker, built once per process from the configuration and the recovery mode: the
failure ledger, the fault injector, ft_launcher's rank monitor, the trainer's hooks and the in-process restart
tracker, and what each (re-)entry and the exit do with them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platform_config.schema import ModeLayers, ProjectConfig
from training.resilience.exit_codes import FailureLedger, classify
from training.resilience.exit_policy import Exit
from training.resilience.faults import FaultInjector, schedule_from_config
from training.resilience.ft_monitor import FtMonitor
from training.resilience.hooks import ResilienceHooks
from training.resilience.inprocess import RestartTracker


@dataclass
class WorkerResilience:
    """Who holds what: the ledger counts faults, the injector fires them, the monitor talks to ft_launcher, the hooks
    are the trainer's view of all three, the tracker what NVRx's Wrapper saw."""

    ledger: FailureLedger
    injector: FaultInjector
    monitor: FtMonitor
    hooks: ResilienceHooks
    tracker: RestartTracker

    @classmethod
    def build(
        cls, cfg: ProjectConfig, layers: ModeLayers, run_dir: Path, rank: int, world_size: int, steps: int,
        faults: str | None, events: Any,
    ) -> WorkerResilience:  # fmt: skip
        """``faults``: the ``--faults`` schedule (None: ``cfg.faults``); ``events``: the worker's event log."""
        ledger = FailureLedger(run_dir, rank, cfg.faults.max_repeats)
        schedule = schedule_from_config(cfg, faults, steps, world_size)
        injector = FaultInjector(schedule, run_dir, rank, events, ledger, events.layer)
        monitor = FtMonitor(enabled=layers.ft_launcher, calculate_timeouts=cfg.ft.calculate_timeouts)
        hooks = ResilienceHooks(
            cfg, injector, monitor, inprocess=layers.inprocess, ft_launcher=layers.ft_launcher, events=events
        )
        return cls(ledger, injector, monitor, hooks, RestartTracker())

    def connect(self, call_wrapper: Any) -> None:
        """On every entry: NVRx's progress pings follow this iteration, and the rank monitor is connected.

        Connected here, inside the in-process Wrapper (once per process): NVRx forks its monitor daemon on entering
        the Wrapper, and a connection opened before that fork is inherited by the daemon, which keeps it open after
        this worker has died."""
        self.hooks.pings.bind(call_wrapper)
        if call_wrapper is not None:
            self.monitor.guard = call_wrapper.atomic
        with self.monitor.guard():
            self.monitor.start()

    def resume(self, last_step: int) -> None:
        """A restart's entry: no section is open, and re-entering is progress. Without this heartbeat the rank monitor
        measured the in-process detection, the re-initialisation and the restore against one step's heartbeat timeout
        (seen exceeding its 15 s on 2 loaded cores, so ft_launcher killed a recovery that was under way)."""
        self.monitor.end_all_sections()
        self.monitor.heartbeat(last_step)
        self.hooks.reset_step_timing()

    def entered(self) -> None:
        """(Re-)entering counts as progress (a stall from here on gets a stack dump); a fault repeated too often ends
        the run here (:class:`training.resilience.exit_codes.UnrecoverableError`)."""
        self.hooks.stall.progress()
        self.ledger.check()

    def record_failure(self, err: BaseException, last_step: int) -> None:
        """Count a failure of this rank. Injected faults were counted when they fired; a lost peer is the peer's
        fault, counted by its own rank."""
        cause = classify(err)
        if getattr(err, "fault_kind", None) is None and cause != "peer_lost":
            self.ledger.record(cause, last_step)

    def leave(self, out: Exit) -> None:
        """The worker is exiting with ``out``: a final cause asks ft_launcher not to restart; stack dumps stop."""
        if out.code and out.final:
            self.monitor.request_shutdown(f"{out.cause}: {out.message[:200]}")
        self.hooks.stall.stop()
