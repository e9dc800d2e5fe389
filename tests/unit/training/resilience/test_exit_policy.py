"""How a worker leaves (:mod:`training.resilience.exit_policy`): the exit code, cause and record of each ending."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.common.terminated import Terminated
from training.resilience.exit_codes import UnrecoverableError
from training.resilience.exit_policy import Exit, exit_policy, record_exit
from training.resilience.faults import InjectedFault
from training.resilience.inprocess import RestartTracker


def _exit(err: BaseException | None, tracker: RestartTracker | None = None, completed: bool = False) -> Exit:
    tracker = tracker or RestartTracker()
    return exit_policy(err, tracker, completed=completed, ft_launcher=False, rank=0, unrecoverable=42)


def test_each_ending_has_its_code_cause_and_weight() -> None:
    assert _exit(None) == Exit(0, "completed", "", primary=True, final=False)
    out = _exit(InjectedFault("exception", 7, 0))
    assert (out.code, out.cause, out.primary, out.final) == (10, "exception", True, False)
    out = _exit(UnrecoverableError("exception@7/step on rank 0 failed 4 times"))
    assert (out.code, out.cause, out.final) == (42, "unrecoverable", True)
    out = _exit(Terminated("SIGTERM"))
    assert (out.code, out.cause, out.primary) == (143, "terminated", False)
    assert _exit(RuntimeError("x")).message == "RuntimeError: x"


def test_a_completed_run_ignores_a_teardown_error() -> None:
    assert _exit(RuntimeError("store host gone"), completed=True) == Exit()


def test_a_teardown_error_on_top_of_a_lost_peer_abort_keeps_the_abort_s_reason() -> None:
    """Recorded (NVRx 0.4.1, a cluster run's survivor of a lost node): the Wrapper raised its own teardown error on
    top of the RestartAbort; the exit said only the teardown error."""
    reason = "1 of 2 ranks are left: a peer was lost"
    tracker = RestartTracker(abort_cause="peer_lost", abort_reason=reason)
    out = _exit(ValueError("invalid literal for int() with base 10: \"b'1'\""), tracker)
    assert (out.code, out.cause, out.primary) == (14, "peer_lost", False)
    assert out.message == (
        "in-process layer stopped: 1 of 2 ranks are left: a peer was lost "
        "(then, tearing down: ValueError: invalid literal for int() with base 10: \"b'1'\")"
    )


def test_the_record_says_the_exit_and_a_consequence_keeps_the_primary_cause(tmp_path: Path, capsys) -> None:
    record_exit(Exit(10, "exception", "RuntimeError: x"), tmp_path, 1, 42)
    record_exit(Exit(14, "peer_lost", "lost", primary=False), tmp_path, 0, 42)
    assert "[train] rank 1: exiting with code 10 (exception): RuntimeError: x" in capsys.readouterr().err
    status = json.loads((tmp_path / "exit_status.json").read_text())
    assert (status["code"], status["cause"], status["rank"]) == (10, "exception", 1)


@pytest.mark.parametrize("cause", ["config", "no_usable_checkpoint", "checkpoint_root_missing"])
def test_a_cause_that_restarting_cannot_help_fails_the_job(cause: str) -> None:
    err = RuntimeError("x")
    err.fault_kind = cause  # type: ignore[attr-defined]
    assert _exit(err).final
