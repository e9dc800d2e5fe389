"""The resilience side of one worker (:mod:`training.resilience.worker`): what it counts and what an exit asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_config import MODE_LAYERS, RecoveryMode, config_from_dict
from training.resilience.exit_codes import UnrecoverableError
from training.resilience.exit_policy import Exit
from training.resilience.faults import InjectedFault
from training.resilience.worker import WorkerResilience
from training.telemetry.events import EventLog


def _worker(run_dir: Path) -> WorkerResilience:
    cfg = config_from_dict({"faults": {"max_repeats": 1}})
    layers = MODE_LAYERS[RecoveryMode.ASYNC_CKPT]  # no NVRx layer: the rank monitor stays off
    return WorkerResilience.build(cfg, layers, run_dir, 0, 2, 20, "exception@5:1", EventLog(run_dir, 0))


def test_the_schedule_and_the_layers_reach_the_parts(tmp_path: Path) -> None:
    res = _worker(tmp_path)
    assert [(f.kind, f.step, f.rank) for f in res.injector.all_faults] == [("exception", 5, 1)]
    assert res.injector.faults == []  # rank 1's, not this rank's
    assert res.hooks.injector is res.injector and res.hooks.monitor is res.monitor
    assert not res.monitor.active and (res.hooks.inprocess, res.hooks.ft_launcher) == (False, False)


def test_only_this_rank_s_own_uninjected_failures_are_counted(tmp_path: Path) -> None:
    res = _worker(tmp_path)
    res.record_failure(InjectedFault("exception", 3, 0), 3)  # counted when it fired
    res.record_failure(ConnectionResetError("Connection reset by peer"), 3)  # a lost peer: the peer's fault
    assert res.ledger.counts() == {}
    res.record_failure(RuntimeError("boom"), 3)
    assert res.ledger.counts() == {"exception@3/step": 1}
    res.entered()  # once is within faults.max_repeats
    res.record_failure(RuntimeError("boom"), 3)
    with pytest.raises(UnrecoverableError, match="exception@3/step on rank 0 failed 2 times"):
        res.entered()


def test_only_a_final_exit_asks_the_launcher_not_to_restart(tmp_path: Path) -> None:
    res = _worker(tmp_path)
    asked: list[str] = []
    res.monitor.request_shutdown = asked.append  # type: ignore[method-assign]
    res.leave(Exit(10, "exception", "RuntimeError: x"))
    res.leave(Exit())
    assert asked == []
    res.leave(Exit(42, "unrecoverable", "exception@3/step on rank 0 failed 2 times", final=True))
    assert asked == ["unrecoverable: exception@3/step on rank 0 failed 2 times"]
