"""``TrainerHooks`` of a resilient run: fault points, ft_launcher sections and heartbeats, NVRx progress pings with the
derived step timeout (:mod:`training.resilience.hang`), the timeout checks, and the extra checkpoint state."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from platform_config.schema import ProjectConfig
from training.resilience import timeout_check
from training.resilience.faults import FaultInjector
from training.resilience.ft_monitor import FtMonitor
from training.resilience.hang import StepPings
from training.resilience.stall_dump import StallDump, threshold_s

#: Step intervals (after the first) measured before the step-time check runs. An interval is the time between two
#: heartbeats less the non-step sections in it (a checkpoint's stall, an evaluation), which have checks of their own.
STEP_CHECK_AFTER = 5
#: Sections that are not steps: NVRx's manual progress timestamp gives them the full soft timeout.
NON_STEP_SECTIONS = ("checkpoint", "eval")


class PhaseClock:
    """Times consecutive start-up phases; each :meth:`lap` emits a ``phase`` event with the seconds since the last."""

    def __init__(self, events: Any) -> None:
        self.events = events
        self.t = time.monotonic()

    def restart(self) -> None:
        self.t = time.monotonic()

    def lap(self, phase: str, **extra: Any) -> float:
        now = time.monotonic()
        seconds = now - self.t
        self.events.emit("phase", phase=phase, s=round(seconds, 4), **extra)
        self.t = now
        return seconds


class ResilienceHooks:
    """``TrainerHooks``: fault points, ft sections/heartbeats, NVRx step pings, timeout checks, extra state."""

    def __init__(
        self,
        cfg: ProjectConfig,
        injector: FaultInjector,
        monitor: FtMonitor,
        *,
        inprocess: bool,
        ft_launcher: bool,
        events: Any = None,
    ) -> None:
        self.cfg = cfg
        self.injector = injector
        self.monitor = monitor
        self.inprocess = inprocess
        self.ft_launcher = ft_launcher
        self.measured: dict[str, float] = {}
        self.stall = StallDump(threshold_s())
        self.pings = StepPings(cfg.inprocess, events=events)
        #: Set after each restore: the next heartbeat ends the ``first_step`` phase.
        self.clock: PhaseClock | None = None
        self._last_beat: float | None = None
        self._non_step_s = 0.0  # non-step sections since the last heartbeat
        self._intervals: list[float] = []
        self._checked: set[str] = set()

    def fault_point(self, phase: str, step: int) -> None:
        self.injector.fault_point(phase, step)

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        if name in NON_STEP_SECTIONS:
            self.pings.phase()
        with self.monitor.section(name):
            yield
        elapsed = time.monotonic() - t0
        if name in NON_STEP_SECTIONS:
            self.pings.resume()
            self._non_step_s += elapsed
        key = {"setup": "init_s", "checkpoint": "checkpoint_s"}.get(name)
        if key and key not in self._checked:
            self._check(key, elapsed)
        if name == "checkpoint":
            self.monitor.at_checkpoint()

    def heartbeat(self, step: int) -> None:
        self.monitor.heartbeat(step)
        self.pings.step(step)
        if self.clock is not None:
            self.clock.lap("first_step", step=step)
            self.clock = None
        self.stall.progress()
        now = time.monotonic()
        if self._last_beat is not None:
            self._intervals.append(now - self._last_beat - self._non_step_s)
        self._last_beat, self._non_step_s = now, 0.0
        if len(self._intervals) == STEP_CHECK_AFTER and "step_s" not in self._checked:
            self._check("step_s", max(self._intervals[1:]))

    def keepalive(self) -> None:
        """A wait that is progress though no step ends (the last save's write): ft_launcher's heartbeat, and NVRx's
        progress ping with the full soft timeout (a phase); no step is measured."""
        self.monitor.heartbeat(-1)
        self.pings.phase()
        self.stall.progress()

    def reset_step_timing(self) -> None:
        self._last_beat, self._non_step_s = None, 0.0
        self._intervals.clear()

    def _check(self, key: str, value: float) -> None:
        self._checked.add(key)
        self.measured[key] = round(value, 4)
        measured = timeout_check.Measured(**{key: value})
        findings = timeout_check.check(self.cfg, measured, inprocess=self.inprocess, ft_launcher=self.ft_launcher)
        if self.injector.rank == 0 or any(f.level == "error" for f in findings):
            timeout_check.enforce(findings)

    def extra_state(self) -> dict[str, Any]:
        return {"fault_injector": self.injector, "ft_monitor": self.monitor}
