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


def _run(schedule: MemorySchedule, steps: int, step_s: dict[int, float], stall_s: float) -> list[tuple[int, str]]:
    """Drive ``schedule`` like the trainer: step_done after each step, then a snapshot when due."""
    taken, lines = [], []
    for step in range(1, steps + 1):
        line = schedule.step_done(step, step_s.get(step, 0.2))
        if line:
            lines.append(line)
        if schedule.due(step):
            taken.append(step)
            schedule.snapshot_taken(step, stall_s)
    return [(s, lines[0] if lines else "") for s in taken]


def test_auto_measures_a_first_snapshot_then_keeps_the_budget() -> None:
    # 0.2 s steps; a snapshot stalls the loop 10 ms and slows its next step by 10 ms (0.21 s): 20 ms a snapshot,
    # 1% of 0.2 s is 2 ms, so every 10 steps.
    schedule = MemorySchedule("auto", budget=0.01, ceiling=50)
    slow_after = {FIRST_AFTER + 2 + 10 * k: 0.21 for k in range(10)}
    slow_after[FIRST_AFTER + 2] = 0.21
    taken = _run(schedule, 60, slow_after, stall_s=0.010)
    steps = [s for s, _ in taken]
    assert steps == [FIRST_AFTER + 1, 14, 24, 34, 44, 54]
    assert schedule.interval == 10 and schedule.cost_s == pytest.approx(0.020)
    assert taken[0][1].startswith("memory interval 10 steps (auto): a snapshot costs the loop 20.0 ms")


def test_auto_re_decides_when_step_time_changes() -> None:
    schedule = MemorySchedule("auto", budget=0.01, ceiling=100)
    _run(schedule, 30, {}, stall_s=0.010)  # 10 ms on 0.2 s steps -> 5
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
    _run(schedule, 10, {}, stall_s=0.010)
    assert seen and seen[0] == [pytest.approx(0.010), pytest.approx(0.2)]
    assert schedule.interval == 20  # 40 ms / 2 ms
