"""ft_launcher without the idle second of NVRx's barrier rendezvous (``training.resilience.ft_launcher``)."""

from __future__ import annotations

import sys
import time
import types
from importlib.metadata import version

import pytest

from training.resilience import ft_launcher


def test_an_nvrx_without_the_barrier_rendezvous_has_nothing_to_change() -> None:
    assert version("nvidia-resiliency-ext") == "0.4.1"  # the CPU machines' NVRx: no ft_rendezvous_barrier
    assert ft_launcher.sync_before_waiting() == "no barrier rendezvous"


class RoundState:
    """NVRx 0.7.0's step 0 as far as the change is concerned: rounds closed (1) or open (0) in the store; the state
    syncs only once it has found its round closed, then sleeps its fixed second before it looks again."""

    def __init__(self, rounds: dict[int, int]) -> None:
        self.rounds, self._round = rounds, 0

    def _sync_from_per_round_state(self) -> bool:
        before = self._round
        while self.rounds.get(self._round) == 1:
            self._round += 1
        return self._round > before

    def _wait_for_rendezvous_open(self, node_desc: str, stop_event: object = None) -> None:
        while True:
            if self.rounds.get(self._round) == 0:
                return
            if self.rounds.get(self._round) == 1:
                self._sync_from_per_round_state()
            time.sleep(1.0)


def _install(monkeypatch: pytest.MonkeyPatch, state: type) -> None:
    module = types.ModuleType("nvidia_resiliency_ext.fault_tolerance.ft_rendezvous_barrier")
    module._RendezvousBarrierState = state  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)


@pytest.fixture
def barrier(monkeypatch: pytest.MonkeyPatch) -> type[RoundState]:
    state = type("State", (RoundState,), {})
    _install(monkeypatch, state)
    return state


def test_a_launcher_that_opened_the_next_round_joins_it_without_the_second(barrier: type[RoundState]) -> None:
    unchanged = barrier({0: 1, 1: 0})  # round 0 closed (the failed workers' round), round 1 opened by this launcher
    t0 = time.monotonic()
    unchanged._wait_for_rendezvous_open("node")
    assert time.monotonic() - t0 >= 1.0 and unchanged._round == 1

    assert ft_launcher.sync_before_waiting() == "synced"
    assert ft_launcher.sync_before_waiting() == "synced"  # once: a second call does not wrap it again
    changed = barrier({0: 1, 1: 0})
    t0 = time.monotonic()
    changed._wait_for_rendezvous_open("node", stop_event=None)
    assert time.monotonic() - t0 < 0.5 and changed._round == 1


def test_a_round_state_without_the_sync_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    wait = RoundState._wait_for_rendezvous_open
    _install(monkeypatch, type("State", (), {"_wait_for_rendezvous_open": wait}))
    assert ft_launcher.sync_before_waiting() == "NVRx's _RendezvousBarrierState lacks _sync_from_per_round_state"
