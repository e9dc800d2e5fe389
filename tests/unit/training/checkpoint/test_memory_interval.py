"""The memory tier's schedule (``training.checkpoint.memory_interval``): fixed intervals, and ``auto`` from known
snapshot costs and step times."""

from __future__ import annotations

import pytest

from training.checkpoint.memory_interval import FIRST_AFTER, MemorySchedule, interval_for


@pytest.mark.parametrize(
    ("cost_s", "step_s", "budget", "ceiling", "expected"),
    [
        (0.020, 0.196, 0.01, 100, 11),  # 20 ms / (1% of 196 ms) = 10.2 -> 11
        (0.0196, 0.196, 0.01, 100, 10),  # exactly 1% at 10 steps
        (1.56, 0.196, 0.01, 100, 100),  # 796 -> the ceiling
        (0.001, 0.5, 0.01, 100, 1),  # cheaper than the budget of one step: every step
        (0.030, 0.196, 0.02, 25, 8),  # 30 / 3.92 = 7.65 -> 8
        (0.1, 0.0, 0.01, 25, 25),  # no step time measured: the ceiling
    ],
)
def test_interval_for_known_costs(cost_s: float, step_s: float, budget: float, ceiling: int, expected: int) -> None:
    assert interval_for(cost_s, step_s, budget, ceiling) == expected


def test_a_fixed_interval_is_every_n_steps_and_0_is_never() -> None:
    five = MemorySchedule(5)
    assert [s for s in range(1, 21) if five.due(s)] == [5, 10, 15, 20]
    assert five.step_done(5, 0.1) is None  # measures nothing, decides nothing
    never = MemorySchedule(0)
    assert not never.enabled and not any(never.due(s) for s in range(1, 50))


def _run(
    schedule: MemorySchedule, steps: int, stall_s: float, after_s: float = 0.0, step_s: float = 0.2
) -> list[tuple[int, str]]:
    """Drive ``schedule`` like the trainer: step_done after each step (``step_s``, ``after_s`` more on the step after
    a snapshot), then a snapshot when due. The snapshots' steps, each with the first line logged after it."""
    taken: list[tuple[int, str]] = []
    slow = False
    for step in range(1, steps + 1):
        line = schedule.step_done(step, step_s + (after_s if slow else 0.0))
        slow = False
        if line and taken:
            taken[-1] = (taken[-1][0], taken[-1][1] or line)
        if schedule.due(step):
            taken.append((step, ""))
            schedule.snapshot_taken(step, stall_s)
            slow = True
    return taken


def test_auto_measures_a_first_snapshot_then_keeps_the_budget_growing_by_doublings() -> None:
    # 0.2 s steps; a snapshot stalls the loop 10 ms and slows its next step by 10 ms (0.21 s): 20 ms a snapshot,
    # 1% of 0.2 s is 2 ms, so every 10 steps; from the first interval (3) it grows 6, then 10.
    schedule = MemorySchedule("auto", budget=0.01, ceiling=50)
    taken = _run(schedule, 60, stall_s=0.010, after_s=0.010)
    assert [s for s, _ in taken] == [FIRST_AFTER + 1, 10, 20, 30, 40, 50, 60]
    assert schedule.interval == 10 and schedule.cost_s == pytest.approx(0.020)
    assert taken[0][1] == (
        "memory interval 6 steps (auto): a snapshot costs the loop 20.0 ms, a step takes 200.0 ms, so every 6 steps "
        "it is 1.67% of the time (budget 1.00%, at most 50 steps); growing by at most x2 a snapshot"
    )
    assert taken[1][1].startswith("memory interval 10 steps (auto): a snapshot costs the loop 20.0 ms")


def test_one_costly_first_snapshot_cannot_push_the_interval_to_the_ceiling() -> None:
    """Measured on 1 x H100 at 1B: the first snapshot of a process cost 244 ms (its next step 0.41 s, one-time),
    later ones 63 ms on 0.186 s steps (34 steps). Without the growth bound the first decision was 100 steps."""
    schedule = MemorySchedule("auto", budget=0.01, ceiling=100)
    for step in range(1, FIRST_AFTER + 2):
        schedule.step_done(step, 0.186)
    assert not schedule.due(FIRST_AFTER) and schedule.due(FIRST_AFTER + 1)
    schedule.snapshot_taken(FIRST_AFTER + 1, 0.018)
    schedule.step_done(FIRST_AFTER + 2, 0.186 + 0.226)  # 18 + 226 = 244 ms: 132 steps alone, the ceiling 100
    assert schedule.interval == 2 * FIRST_AFTER
    intervals = []
    step = FIRST_AFTER + 2
    while len(intervals) < 4:
        step += 1
        schedule.step_done(step, 0.186 + (0.045 if schedule._stall_s is not None else 0.0))
        if schedule.due(step):
            schedule.snapshot_taken(step, 0.018)  # 18 + 45 = 63 ms: 34 steps
            schedule.step_done(step + 1, 0.186 + 0.045)
            intervals.append(schedule.interval)
            step += 1
    # costs decided on (median of the last 3): 153.5 ms (83 steps, capped 12), then 63 ms (34 steps, capped 24), 34
    assert intervals == [12, 24, 34, 34]


def test_one_snapshot_whose_next_step_paid_for_something_else_does_not_move_the_interval() -> None:
    """1B on 1 x H100: snapshots cost 55-62 ms, one whose next step also paid for an evaluation 130 ms."""
    schedule = MemorySchedule("auto", budget=0.01, ceiling=100)
    taken = _run(schedule, 200, stall_s=0.018, after_s=0.042, step_s=0.2)  # 60 ms a snapshot: 30 steps
    assert schedule.interval == 30
    step = taken[-1][0]
    while not schedule.due(step):
        step += 1
        schedule.step_done(step, 0.2)
    schedule.snapshot_taken(step, 0.018)
    schedule.step_done(step + 1, 0.2 + 0.112)  # 130 ms: alone it would give 65 steps
    assert schedule.interval == 30 and schedule.cost_s == pytest.approx(0.060)


def test_auto_re_decides_when_step_time_changes() -> None:
    schedule = MemorySchedule("auto", budget=0.01, ceiling=100)
    _run(schedule, 30, stall_s=0.010)  # 10 ms on 0.2 s steps -> 5
    assert schedule.interval == 5
    for step in range(31, 70):  # steps become 4x faster: the same 10 ms is 4x the share
        schedule.step_done(step, 0.05)
        if schedule.due(step):
            schedule.snapshot_taken(step, 0.010)
    assert schedule.interval == 20


def test_auto_decides_from_the_ranks_agreed_figures() -> None:
    """Every rank must snapshot at the same steps: the decision uses ``agree``'s maximum over the ranks (here
    another rank whose snapshot costs 40 ms)."""
    seen = []

    def agree(values: list[float]) -> list[float]:
        seen.append(list(values))
        return [max(values[0], 0.040), values[1]]

    schedule = MemorySchedule("auto", budget=0.01, ceiling=100, agree=agree)
    _run(schedule, 60, stall_s=0.010)
    assert seen and seen[0] == [pytest.approx(0.010), pytest.approx(0.2)]
    assert schedule.interval == 20  # 40 ms / 2 ms, reached by doublings: 6, 12, 20
