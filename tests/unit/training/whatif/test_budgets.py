"""Restart budgets, generations and spares of a simulated job, against hand-worked sequences."""

from __future__ import annotations

from training.whatif.budgets import RestartBudgets
from training.whatif.params import Dist, LayerParams, Scenario


def _budgets(**kw: object) -> RestartBudgets:
    layers = {
        "inprocess": LayerParams(Dist(1.0), budget=2),
        "ft_launcher": LayerParams(Dist(1.0), budget=1),
        "job": LayerParams(Dist(1.0), budget=1),
    }
    return RestartBudgets(Scenario(steps=10, step_s=1.0, nodes=2, layers=layers, **kw).validate())  # type: ignore[arg-type]


def test_a_new_process_resets_the_in_process_count_and_a_new_pod_both() -> None:
    b = _budgets()
    b.charge("inprocess", 0, node_loss=False)
    b.charge("inprocess", 0, node_loss=False)
    assert not b.left("inprocess", 0, ignored=False)  # 2 of 2 used
    b.charge("ft_launcher", 0, node_loss=False)  # new workers: in-process starts again
    assert b.used == {"inprocess": 0, "ft_launcher": 1, "job": 0}
    assert b.left("inprocess", 0, ignored=False) and not b.left("ft_launcher", 0, ignored=False)
    b.charge("job", 1, node_loss=False)  # a new pod: both inner counts start again; index 1 charged
    assert b.used == {"inprocess": 0, "ft_launcher": 0, "job": 1}
    assert b.pod_failures == [0, 1]
    assert b.left("job", 0, ignored=False) and not b.left("job", 1, ignored=False)


def test_a_lost_node_is_not_counted_against_its_index() -> None:
    b = _budgets()
    b.charge("job", 1, node_loss=True)
    b.charge("job", 1, node_loss=True)
    assert b.pod_failures == [0, 0]
    b.charge("job", 1, node_loss=False)
    assert not b.left("job", 1, ignored=False) and b.left("job", 1, ignored=True)


def test_a_resubmitted_job_starts_every_budget_again() -> None:
    b = _budgets()
    b.charge("job", 0, node_loss=False)
    b.failed_attempt("inprocess")
    b.charge("resubmit", 0, node_loss=False)
    assert b.used == {"inprocess": 0, "ft_launcher": 0, "job": 0} and b.pod_failures == [0, 0]


def test_generations_follow_the_layer_that_restarted() -> None:
    b = _budgets()
    assert b.bump_generation("inprocess") is False
    assert b.bump_generation("inprocess") is False
    assert b.gen == {"restart": 0, "attempt": 0, "iteration": 2}
    assert b.bump_generation("ft_launcher") is True
    assert b.gen == {"restart": 1, "attempt": 0, "iteration": 0}
    assert b.bump_generation("job") is True
    assert b.gen == {"restart": 0, "attempt": 1, "iteration": 0}


def test_a_spare_takes_a_lost_node_and_is_free_again_after_its_own_replacement() -> None:
    b = _budgets(spares=1, node_replace_s=600.0)
    assert b.replacement_wait(100.0) == 0.0  # the spare joins at once; its replacement arrives at 700
    assert b.replacement_wait(300.0) == 600.0  # no spare free: wait for a new node
    assert b.replacement_wait(700.0) == 0.0  # the spare's replacement has arrived
