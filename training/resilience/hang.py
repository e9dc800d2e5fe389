"""Hang detection through NVRx's progress timestamps: a manual ping per step, against a soft timeout derived from the
measured step time (``inprocess.soft_timeout_s`` is the ceiling, ``inprocess.step_timeout_floor_s`` the floor).

NVRx's monitor process compares two timestamps with the Wrapper's soft and hard timeouts (docs/nvrx-monitor.md):

- ``auto``: the progress watchdog's pending call, which the interpreter runs only while the main thread executes
  Python bytecode. A rank blocked in C (a collective, a CUDA synchronisation) stops it; a rank spinning in Python
  does not (the ``hang`` fault, or any Python-level livelock).
- ``manual``: set by ``CallWrapper.ping()``. NVRx starts checking it with the first ping of each restart iteration.

The trainer pings after every step (:meth:`StepPings.step`), so a rank that stops completing steps times out however
it hangs. The Wrapper's timeouts are fixed when its monitor process forks, so a step's shorter budget is expressed in
the timestamp: a ping that must be followed by the next one within ``budget`` seconds is sent as
``manual = now - (soft_timeout - budget)``. NVRx then fires the soft timeout ``budget`` seconds after the ping, and the
hard timeout ``hard_timeout - soft_timeout`` seconds later. Phases that are not steps (checkpoint, eval) get the full
``soft_timeout`` budget, and after the last step the manual timestamp is dropped again (:meth:`StepPings.release`),
so the closing save and finalisation are watched as they were before: by the automatic timestamp only.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

#: Step gaps the derived timeout looks at (the slowest of them counts).
WINDOW = 20
#: Step gaps measured (in this process) before the derived timeout replaces the ceiling.
MIN_SAMPLES = 5


def step_budget(gaps: list[float], *, factor: float, floor_s: float, ceiling_s: float) -> float:
    """The soft timeout of one step: ``factor`` x the slowest gap, within [floor_s, ceiling_s]; the ceiling until
    :data:`MIN_SAMPLES` gaps are known."""
    if len(gaps) < MIN_SAMPLES:
        return ceiling_s
    return min(ceiling_s, max(floor_s, factor * max(gaps)))


class StepPings:
    """Manual progress pings to NVRx's monitor process, one per step, with a derived step budget.

    ``bind`` once per Wrapper iteration (the CallWrapper); without one (no in-process layer) every method is a
    no-op apart from measuring. The step gaps survive in-process restarts (the same process, the same machine).
    """

    def __init__(self, ip: Any, *, events: Any = None) -> None:
        self.soft_s = float(ip.soft_timeout_s)
        self.hard_s = float(ip.hard_timeout_s)
        self.factor = float(ip.step_timeout_factor)
        self.floor_s = float(ip.step_timeout_floor_s)
        self.events = events
        self.gaps: deque[float] = deque(maxlen=WINDOW)
        self._watchdog: Any = None
        self._last_ping: float | None = None
        self._clean = False  # no other phase since the last step ping: the gap to the next one is a step's
        self._reported: float | None = None

    def bind(self, call_wrapper: Any) -> None:
        """A new iteration: NVRx reset its timestamps (no manual one until the first ping)."""
        self._watchdog = None
        if call_wrapper is not None:
            watchdog = getattr(call_wrapper, "progress_watchdog", None)
            missing = [a for a in ("timestamp", "send", "reset") if not hasattr(watchdog, a)]
            if missing:
                raise RuntimeError(
                    f"NVRx's CallWrapper.progress_watchdog lacks {', '.join(missing)}: the derived step timeouts "
                    "(training/resilience/hang.py) need NVRx 0.4 to 0.7's ProgressWatchdog"
                )
            self._watchdog = watchdog
        self._last_ping = None
        self._clean = False
        self._reported = None

    @property
    def budget_s(self) -> float:
        return step_budget(list(self.gaps), factor=self.factor, floor_s=self.floor_s, ceiling_s=self.soft_s)

    def step(self, step: int) -> None:
        """A step completed: measure the gap since the previous step ping, then ping with the step budget."""
        now = time.monotonic()
        if self._clean and self._last_ping is not None:
            self.gaps.append(now - self._last_ping)
        self._ping(self.budget_s, now)
        self._clean = True
        self._report(step)

    def phase(self) -> None:
        """A phase that is not a step starts (checkpoint, eval): it gets the full soft timeout, and the gap to the
        next step ping is not a step's. Before the first step of an iteration nothing is sent (set-up and restore
        are watched by the automatic timestamp alone)."""
        self._clean = False
        if self._last_ping is not None:
            self._ping(self.soft_s, time.monotonic())

    def resume(self) -> None:
        """That phase ended: the next step has the step budget again, counted from now."""
        if self._last_ping is not None:
            self._ping(self.budget_s, time.monotonic())

    def release(self) -> None:
        """Training is over: drop the manual timestamp (NVRx's own reset), so the closing save and teardown are
        watched by the automatic timestamp only, as before the first step."""
        if self._watchdog is not None and self._last_ping is not None:
            self._watchdog.reset()
        self._last_ping = None
        self._clean = False

    def _ping(self, budget_s: float, now: float) -> None:
        self._last_ping = now
        if self._watchdog is None:
            return
        # NVRx fires the soft timeout when monotonic() - manual > soft_timeout: ``budget_s`` after this ping.
        self._watchdog.timestamp.manual = now - (self.soft_s - budget_s)
        self._watchdog.send()

    def _report(self, step: int) -> None:
        """A ``hang_timeouts`` event when the derived budget first applies and when it moves by more than 25% (only
        under NVRx's Wrapper: without it nothing is armed)."""
        budget = self.budget_s
        if self.events is None or self._watchdog is None or len(self.gaps) < MIN_SAMPLES:
            return
        if self._reported is not None and abs(budget - self._reported) <= 0.25 * self._reported:
            return
        self._reported = budget
        self.events.emit(
            "hang_timeouts",
            step=step,
            soft_s=round(budget, 3),
            hard_s=round(budget + self.hard_s - self.soft_s, 3),
            step_s=round(max(self.gaps), 4),
        )
