"""When the memory tier snapshots: every N steps, or ``auto``, the smallest interval that keeps its cost to the
training loop within a budget.

A snapshot costs the loop its time on the training thread (:meth:`MemorySchedule.snapshot_taken`) plus whatever it
adds to the next step (a copy the optimizer step waits for, memory bandwidth), measured as that step's time above
the median of the recent steps (:meth:`MemorySchedule.step_done`). With ``auto`` the interval is then::

    interval = ceil(cost / (budget x step time)), within [1, ceiling]

so that ``cost / (interval x step time) <= budget``, re-decided after every snapshot as step time and cost move.
The interval at most doubles from one decision to the next (:data:`GROWTH`): the first snapshots of a process pay
one-time costs (the first copies into freshly page-locked memory, a 1B step 0.41 s instead of 0.19 s measured on an
H100), and a decision taken on one such cost alone chose 100 steps where 34 kept the budget, so a fault at step 100
rolled back 89 steps. The cost decided on is the median of the last :data:`COSTS` snapshots' (agreed) costs: a
snapshot whose next step also paid for an evaluation or a storage save measured 115-147 ms where its neighbours
measured 55-62 ms (1B, 1 x H100), and one such figure alone doubled the interval.
Every rank must snapshot at the same steps (the peer copies are collective): the inputs are agreed first (the
largest cost and step time of any rank, through ``agree``), so every rank computes the same interval.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable
from typing import Literal

AUTO: Literal["auto"] = "auto"
#: Steps measured before the first ``auto`` snapshot (the first is taken then, to measure what one costs).
FIRST_AFTER = 3
#: Step times the median is taken over.
WINDOW = 20
#: The most an ``auto`` interval may grow at one decision (a factor): it falls at once, it rises by doublings.
GROWTH = 2
#: Snapshot costs the decision takes the median of.
COSTS = 3


def interval_for(cost_s: float, step_s: float, budget: float, ceiling: int) -> int:
    """The smallest interval ``n >= 1`` with ``cost_s / (n x step_s) <= budget``, at most ``ceiling``."""
    if step_s <= 0 or budget <= 0:
        return max(1, ceiling)
    n = math.ceil(cost_s / (budget * step_s) - 1e-9)
    return max(1, min(ceiling, n))


def next_interval(before: int, cost_s: float, step_s: float, budget: float, ceiling: int) -> int:
    """:func:`interval_for`, grown at most :data:`GROWTH` times ``before``."""
    return min(interval_for(cost_s, step_s, budget, ceiling), GROWTH * before)


class MemorySchedule:
    """The steps at which one rank's memory tier snapshots (the same on every rank).

    ``setting``: an interval in steps (0: never) or ``"auto"``; ``budget``: the share of the loop's time ``auto``
    may spend on snapshots; ``ceiling``: the longest ``auto`` interval (the storage interval: rarer snapshots would
    not shorten any rollback); ``agree``: the element-wise maximum of a list of floats over every rank (a
    collective; identity in a one-rank run).
    """

    def __init__(
        self,
        setting: int | Literal["auto"],
        *,
        budget: float = 0.01,
        ceiling: int = 1_000_000,
        agree: Callable[[list[float]], list[float]] | None = None,
    ) -> None:
        self.auto = setting == AUTO
        self.interval = FIRST_AFTER if self.auto else int(setting)
        self.budget, self.ceiling = budget, max(1, ceiling)
        self.agree = agree or (lambda values: values)
        self._steps: deque[float] = deque(maxlen=WINDOW)
        self._next: int | None = None  # auto: the step of the next snapshot (None: FIRST_AFTER steps from now)
        self._stall_s: float | None = None  # the last snapshot's time on the training thread, until measured
        self._costs: deque[float] = deque(maxlen=COSTS)  # the last snapshots' agreed costs
        self.cost_s: float | None = None
        self.step_s: float | None = None

    @property
    def enabled(self) -> bool:
        return self.auto or self.interval > 0

    def due(self, step: int) -> bool:
        if not self.auto:
            return self.interval > 0 and step % self.interval == 0
        return self._next is not None and step >= self._next

    def step_done(self, step: int, step_s: float) -> str | None:
        """Record a step's time (every step, every rank). After a snapshot's next step, ``auto`` re-decides: the
        line to log when the interval changed, else None. Collective when it decides."""
        if not self.auto:
            return None
        if self._next is None and len(self._steps) + 1 >= FIRST_AFTER:
            self._next = step + 1
        if self._stall_s is None:
            self._steps.append(step_s)
            return None
        typical = statistics.median(self._steps) if self._steps else step_s
        mine = [self._stall_s + max(0.0, step_s - typical), typical]
        self._stall_s = None
        cost_s, step_time = self.agree(mine)
        self._costs.append(cost_s)
        return self._decide(step - 1, statistics.median(self._costs), step_time)

    def snapshot_taken(self, step: int, stall_s: float) -> None:
        """A snapshot of ``step`` took ``stall_s`` on the training thread."""
        if self.auto:
            self._stall_s = stall_s
            self._next = step + self.interval  # until the next step's time re-decides it

    def _decide(self, snapshot_step: int, cost_s: float, step_s: float) -> str | None:
        before = self.interval
        self.cost_s, self.step_s = cost_s, step_s
        self.interval = next_interval(before, cost_s, step_s, self.budget, self.ceiling)
        self._next = snapshot_step + self.interval
        if before != FIRST_AFTER and abs(self.interval - before) <= 0.2 * before:
            return None
        share = cost_s / (self.interval * step_s) if step_s > 0 else 0.0
        growing = self.interval < interval_for(cost_s, step_s, self.budget, self.ceiling)
        return (
            f"memory interval {self.interval} steps (auto): a snapshot costs the loop {cost_s * 1e3:.1f} ms, a step "
            f"takes {step_s * 1e3:.1f} ms, so every {self.interval} steps it is {share:.2%} of the time "
            f"(budget {self.budget:.2%}, at most {self.ceiling} steps)"
            + (f"; growing by at most x{GROWTH} a snapshot" if growing else "")
        )
