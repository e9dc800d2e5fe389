"""``ResilienceHooks``: the step-time check measures steps, not the checkpoints and evaluations between them."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_config import load_config
from training.resilience import hooks as hooks_module
from training.resilience.faults import FaultInjector
from training.resilience.ft_monitor import FtMonitor
from training.resilience.hooks import STEP_CHECK_AFTER, ResilienceHooks
from training.resilience.timeout_check import TimeoutConfigError
from training.telemetry.events import EventLog


class Clock:
    """``time.monotonic`` for the hooks module, moved by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ResilienceHooks, Clock]:
    """Hooks of a local in-process run (soft timeout 4 s, gloo timeout 3 s), no ft_launcher, on a test clock."""
    cfg = load_config()
    cfg = cfg.model_copy(update={"inprocess": cfg.local.inprocess})
    assert (cfg.inprocess.soft_timeout_s, cfg.inprocess.gloo_timeout_s) == (4.0, 3.0)
    events = EventLog(tmp_path, 0)
    injector = FaultInjector([], tmp_path, 0, events)
    hooks = ResilienceHooks(cfg, injector, FtMonitor(enabled=False), inprocess=True, ft_launcher=False, events=events)
    clock = Clock()
    monkeypatch.setattr(hooks_module, "time", clock)
    return hooks, clock


def _steps(hooks: ResilienceHooks, clock: Clock, seconds: list[float], *, checkpoint_after: int, save_s: float) -> None:
    """Heartbeats of steps taking ``seconds`` each; a checkpoint of ``save_s`` after step ``checkpoint_after``."""
    hooks.heartbeat(0)
    for step, s in enumerate(seconds, start=1):
        clock.now += s
        hooks.heartbeat(step)
        if step == checkpoint_after:
            with hooks.section("checkpoint"):
                clock.now += save_s


def test_a_checkpoint_between_two_steps_is_not_a_step(clocked) -> None:
    """0.5 s steps and a 3.5 s checkpoint after step 3: the step measured is 0.5 s, not 4.0 s (which the 3 s gloo
    timeout and the 4 s soft timeout would have refused with exit 2, as an overloaded CPU run once did)."""
    hooks, clock = clocked
    _steps(hooks, clock, [0.5] * (STEP_CHECK_AFTER + 1), checkpoint_after=3, save_s=3.5)
    assert hooks.measured == {"checkpoint_s": 3.5, "step_s": 0.5}


def test_a_step_slower_than_a_timeout_still_ends_the_run(clocked) -> None:
    """Without a checkpoint in the way the check holds: a 3.2 s step is above the 3 s gloo timeout."""
    hooks, clock = clocked
    with pytest.raises(TimeoutConfigError, match=r"inprocess\.gloo_timeout_s 3 s but a step took 3\.20 s"):
        _steps(hooks, clock, [0.5, 0.5, 3.2, 0.5, 0.5, 0.5], checkpoint_after=99, save_s=0.0)
