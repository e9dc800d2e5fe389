"""A SIGTERM in the training loop (issue 47): the decision with known values (the budget, the plan, the watcher's
bounds, the deferred handler) and the whole path in one process on a real one-rank gloo group: the step ends, the
flag rides the loss all-reduce, the step is saved and committed, then the rank stops."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from platform_config import config_from_dict
from tests.helpers.training_runs import FAST_CONFIG, single_process_group
from training.checkpoint.files import list_committed
from training.resilience import sigterm
from training.resilience.final_save import final_save_plan
from training.resilience.sigterm import StopRequest, Terminated, overdue, stop_budget_s
from training.telemetry.events import EventLog, read_events
from training.trainer import NullHooks, Trainer


@pytest.fixture(autouse=True)
def fresh_request(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Each test its own stop request; the handler's SIG_IGN undone; the pod is being drained (its supervisor wrote
    the drain file)."""
    monkeypatch.setattr(sigterm, "_stop", StopRequest())
    drain = tmp_path / "training-drain"
    drain.touch()
    monkeypatch.setenv(sigterm.DRAIN_FILE_ENV, str(drain))
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def test_the_budget_is_the_grace_period_or_the_launchers_stop_timeout() -> None:
    assert stop_budget_s(600, ft_launcher=False) == 27.0  # torchrun SIGKILLs its workers 30 s after its SIGTERM
    assert stop_budget_s(600, ft_launcher=True) == 597.0  # ft_launcher's --term-timeout is 1800 s
    assert stop_budget_s(30, ft_launcher=True) == 27.0  # the local config's checkpoint section (the grace period)
    assert stop_budget_s(2, ft_launcher=True) == 0.0


@pytest.mark.parametrize(
    ("elapsed", "estimate", "fits", "says"),
    [
        (2.0, 5.0, True, "final save of step 40: the last save took 5.0 s, 25.0 s are left of the 27 s budget"),
        (20.0, 10.0, False, "the final save of step 40 cannot fit: the last save took 10.0 s, 7.0 s are left of the"),
        (1.0, 0.0, True, "final save of step 40: no save measured in this attempt, trying within the 26.0 s left"),
        (28.0, 0.0, False, "no final save of step 40: its budget of 27 s after SIGTERM is spent"),
    ],
)
def test_the_plan(elapsed: float, estimate: float, fits: bool, says: str) -> None:
    plan = final_save_plan(40, elapsed, estimate, 27.0)
    assert plan[0] is fits
    assert plan[1].startswith(says), plan[1]


def test_the_watcher_bounds_the_step_and_the_save() -> None:
    stop = StopRequest(requested_at=100.0, boundary_s=10.0, budget_s=27.0)
    assert overdue(StopRequest(), 1e9) is None
    assert overdue(stop, 105.0) is None
    assert overdue(stop, 111.0) == (
        "the step did not end within 10 s of SIGTERM (a collective waiting on a lost peer): no final save"
    )
    stop.boundary_at = 104.0  # the agreement came: only the budget bounds the save
    assert overdue(stop, 126.0) is None
    assert overdue(stop, 128.0) == "the final save did not finish within its budget of 27 s after SIGTERM"


def test_deferred_sigterm_is_a_request_and_raises_on_leaving() -> None:
    stop = sigterm.request()
    with (
        pytest.raises(Terminated, match="after the last step's agreement"),
        sigterm.deferred(budget_s=27, boundary_s=10),
    ):
        sigterm._on_sigterm(signal.SIGTERM, None)  # no exception here: the step goes on
        assert stop.requested_at is not None
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # a second SIGTERM cannot cut the stop short
    with pytest.raises(Terminated, match="stopping at once"):
        sigterm._on_sigterm(signal.SIGTERM, None)  # outside the loop: at once, as before


def test_a_sigterm_without_a_drain_stops_at_once_even_in_the_loop(tmp_path: Path) -> None:
    """A launcher restarting its group after a fault elsewhere sends SIGTERM without the pod being stopped: no final
    save (its peers are gone or going), the rank stops at once, as before the final save existed."""
    (tmp_path / "training-drain").unlink()
    assert not sigterm.draining()
    with pytest.raises(Terminated, match="stopping at once"), sigterm.deferred(budget_s=27, boundary_s=10):
        sigterm._on_sigterm(signal.SIGTERM, None)


def test_a_failure_after_a_deferred_sigterm_is_a_stop() -> None:
    with (
        pytest.raises(Terminated, match="SIGTERM, then RuntimeError: peer gone"),
        sigterm.deferred(budget_s=27, boundary_s=10),
    ):
        sigterm._on_sigterm(signal.SIGTERM, None)
        raise RuntimeError("peer gone")


class SigtermAt(NullHooks):
    """A SIGTERM during the given step (its forward pass: before the step's loss all-reduce)."""

    def __init__(self, step: int) -> None:
        self.at = step

    def fault_point(self, phase: str, step: int) -> None:
        if phase == "step" and step == self.at:
            sigterm._on_sigterm(signal.SIGTERM, None)


def test_sigterm_mid_step_saves_that_step_and_stops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config_from_dict(FAST_CONFIG)  # a checkpoint every 5 steps
    with single_process_group():
        trainer = Trainer(
            cfg, tmp_path, EventLog(tmp_path, 0), checkpoint_mode="sync", target_steps=20, hooks=SigtermAt(7)
        )
        trainer.setup()
        trainer.restore()
        with pytest.raises(Terminated, match="SIGTERM: stopped after step 7 and its final save"):
            trainer.train()
        trainer.close(failed=True)
    assert trainer.stopping == 1
    assert [e["step"] for e in read_events(tmp_path) if e["event"] == "ckpt_begin"] == [5, 7]
    assert [step for step, _ in list_committed(tmp_path / "checkpoints")][-1] == 7  # the replacement resumes at 7
    out = capsys.readouterr().out
    assert "SIGTERM reached 1 of 1 ranks by step 7: final save of step 7: the last save took" in out
    assert "final save of step 7 committed" in out
