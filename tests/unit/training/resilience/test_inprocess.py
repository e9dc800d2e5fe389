"""The NVRx in-process Wrapper built from the config (real NVRx; a real restart in a subprocess)."""

from __future__ import annotations

import datetime
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from platform_config import load_config
from tests.helpers.training_runs import REPO_ROOT, free_port
from tests.helpers.training_runs import test_env as child_env
from training.resilience.inprocess import (
    RestartTracker,
    _can_detach,
    await_pending_restart,
    build_wrapper,
    fix_initial_ranks,
    restart_pending,
    store_port,
    wrap,
    wrapper_kwargs,
)


def test_wrapper_accepts_config_timeouts() -> None:
    cfg = load_config()
    for ip in (cfg.inprocess, cfg.local.inprocess):
        wrapper = build_wrapper(ip, port=29999, min_world_size=2, tracker=RestartTracker())
        assert wrapper.soft_timeout.total_seconds() == ip.soft_timeout_s
        assert wrapper.store_kwargs["port"] == 29999


def test_store_port_must_differ_from_master_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.delenv("NVRX_INPROCESS_STORE_PORT", raising=False)
    assert store_port(29600) == 29600
    monkeypatch.setenv("NVRX_INPROCESS_STORE_PORT", "29500")
    with pytest.raises(ValueError, match="MASTER_PORT"):
        store_port(29600)


def test_the_groups_are_detached_and_aborted_beside_the_restart_by_default() -> None:
    import torch.distributed as dist

    from training.parallel import background_abort

    ip = load_config().local.inprocess
    assert ip.abort == "detached"
    abort = build_wrapper(ip, port=29999, min_world_size=1, tracker=RestartTracker()).abort
    in_place = build_wrapper(
        ip.model_copy(update={"abort": "in_place"}), port=29999, min_world_size=1, tracker=RestartTracker()
    ).abort
    assert abort.detached and not in_place.detached
    store = dist.TCPStore("127.0.0.1", free_port(), 1, is_master=True, wait_for_workers=False)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        abort(None)  # what NVRx's monitor thread calls on a fault
        assert not dist.is_initialized()  # at once: the abort itself goes on on its own thread
    finally:
        background_abort.await_abort(5.0)
        while background_abort.running():
            time.sleep(0.01)


def test_a_detach_that_fails_aborts_in_place_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import torch.distributed as dist

    from training.parallel import background_abort, detached_groups

    def broken() -> None:
        raise AttributeError("'_World' object has no attribute 'pg_coalesce_state'")

    abort = build_wrapper(load_config().local.inprocess, port=29999, min_world_size=1, tracker=RestartTracker()).abort
    monkeypatch.setattr(detached_groups, "detach", broken)
    store = dist.TCPStore("127.0.0.1", free_port(), 1, is_master=True, wait_for_workers=False)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        abort(None)
        assert background_abort.await_abort(5.0) >= 0.0 and not dist.is_initialized()  # NVRx's abort destroyed it
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert capsys.readouterr().out.startswith(
        "[inprocess] detaching the process groups failed (AttributeError(\"'_World' object has no attribute "
        "'pg_coalesce_state'\")): aborting them in place"
    )


def test_a_torch_without_the_registry_aborts_in_place_and_says_so(capsys: pytest.CaptureFixture) -> None:
    assert _can_detach([]) and not capsys.readouterr().out
    assert not _can_detach(["_world.pg_coalesce_state", "ProcessGroup.shutdown"])
    assert capsys.readouterr().out == (
        "[inprocess] inprocess.abort=detached: this torch lacks _world.pg_coalesce_state, ProcessGroup.shutdown; the "
        "process groups are aborted in place (NVRx's AbortTorchDistributed), and each restart waits for NCCL's abort "
        "(about 1 s)\n"
    )


def test_unknown_kwargs_are_dropped() -> None:
    from nvidia_resiliency_ext import inprocess

    assert wrapper_kwargs(inprocess.Wrapper, soft_timeout=1, no_such_option=2) == {"soft_timeout": 1}


SCRIPT = """
import os, sys
from platform_config import load_config
from training.resilience.inprocess import RestartTracker, build_wrapper, wrap
import torch.distributed as dist
tracker = RestartTracker()
def fn(call_wrapper):
    store = dist.TCPStore("127.0.0.1", int(sys.argv[2]), 1, True)
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.PrefixStore(str(call_wrapper.iteration), store))
    try:
        if call_wrapper.iteration == 0:
            raise MemoryError("first iteration fails")
        return call_wrapper.iteration
    finally:
        dist.destroy_process_group()
cleanups = []
w = build_wrapper(
    load_config().local.inprocess, port=int(sys.argv[1]), min_world_size=1, tracker=tracker,
    on_fault=[lambda: cleanups.append(tracker.cause)],
)
print("result", wrap(w, fn)(), tracker.cause, len(tracker.history), "cleanups", cleanups)
"""


def test_real_in_process_restart_single_rank() -> None:
    env = child_env(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(free_port()), str(free_port())],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # one restart, classified; the on_fault cleanup ran once, after the cause was recorded
    assert "result 1 oom 1 cleanups ['oom']" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_apply_process_env_overrides_launcher_values_and_reports_changes() -> None:
    from training.resilience.inprocess import INPROCESS_PROCESS_ENV, apply_process_env

    env = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_CPP_LOG_LEVEL": "error", "OTHER": "x"}
    changed = apply_process_env(env)
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "2"  # ft_launcher's "1" would kill the process on NCCL errors
    assert env["TORCH_NCCL_RETHROW_CUDA_ERRORS"] == "0"
    assert env["OTHER"] == "x"
    assert changed["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == ("1", "2")
    assert changed["NCCL_NVLS_ENABLE"] == (None, "0")
    assert "TORCH_CPP_LOG_LEVEL" not in changed  # already right
    assert all(env[k] == v for k, v in INPROCESS_PROCESS_ENV.items())
    assert apply_process_env(env) == {}


def test_a_rank_terminated_by_its_sibling_monitor_leaves_the_termination_barrier_readable(tmp_path: Path) -> None:
    """What NVRx's SiblingMonitor does for an unresponsive rank 1 (a lost node), then the survivor's own termination
    barrier in the Wrapper's teardown, on NVRx's real store classes: without :func:`fix_initial_ranks` the first
    writes ``"b'1'"`` into the barrier's key and the second raises ``ValueError`` (recorded: every node loss of
    ``inprocess-ft`` on the local cluster, both NVRx 0.4.1 and 0.7.0)."""
    from nvidia_resiliency_ext.inprocess import store

    fix_initial_ranks()
    fix_initial_ranks()  # idempotent: wrapped once
    base = store.FileStore(str(tmp_path / "store"), 2)
    iteration = store.PrefixStore(3, base)
    iteration.set_initial_rank(1, 1)
    assert iteration.get_initial_ranks([1]) == [1]
    no_wait = datetime.timedelta(0)
    iteration.base_store.termination_barrier(
        ranks=iteration.get_initial_ranks([1]), rendezvous_count=2, timeout=no_wait
    )  # SiblingMonitor.terminate_unresponsive_ranks
    base.termination_barrier(ranks=[0], rendezvous_count=2, timeout=no_wait)  # the survivor's teardown
    key = f"{store.StoreMixin.BARRIER_PREFIX}:reentrant_barrier:{store.StoreMixin.TERMINATION_BARRIER}"
    assert base.get(f"{key}:arrived").decode() == "1,0,"  # both ranks arrived, as ints
    assert base.get(f"{key}:last_worker_arrived") == b"1"


# ---- a restart NVRx fired before the wrapped function failed (await_pending_restart) --------------------------------


def _call_wrapper(fired: bool) -> SimpleNamespace:
    """What ``restart_pending`` reads of NVRx 0.4.1's CallWrapper: the progress watchdog's pause request."""
    flag = threading.Event()
    if fired:
        flag.set()
    return SimpleNamespace(progress_watchdog=SimpleNamespace(pause_requested=flag))


def _restart_in(seconds: float) -> threading.Thread:
    """NVRx's own asynchronous raise of ``RankShouldRestart`` in this (the main) thread, after ``seconds``."""
    from nvidia_resiliency_ext.inprocess.monitor_thread import async_abort_main_thread

    thread = threading.Thread(target=lambda: (time.sleep(seconds), async_abort_main_thread("soft timeout")))
    thread.start()
    return thread


class _NoWrapper:
    """In place of NVRx's Wrapper: its soft timeout, and the entry returned as it is."""

    soft_timeout = datetime.timedelta(seconds=4)

    def __call__(self, entry: object) -> object:
        return entry


def test_a_restart_is_pending_only_once_nvrx_asked_the_watchdog_to_pause() -> None:
    assert restart_pending(_call_wrapper(fired=True))
    assert not restart_pending(_call_wrapper(fired=False))
    assert not restart_pending(None) and not restart_pending(SimpleNamespace())  # another NVRx, or none


def test_an_exception_after_a_fired_restart_becomes_that_restart() -> None:
    """The wrapped function fails (a peer's gloo timeout) after NVRx fired the restart whose first raise was lost:
    the restart NVRx raises again arrives in the wait and leaves the function, caused by the function's error."""
    from nvidia_resiliency_ext.inprocess.monitor_thread import RankShouldRestart

    failure = RuntimeError("Timed out waiting 3000ms for send operation to complete")

    def fn(call_wrapper: object) -> None:
        raise failure

    entry = wrap(_NoWrapper(), fn)
    thread = _restart_in(0.2)
    with pytest.raises(RankShouldRestart) as raised:
        entry(_call_wrapper(fired=True))
    thread.join()
    assert raised.value.__cause__ is failure and str(raised.value) == "soft timeout"
    # no restart fired: the function's error leaves at once
    with pytest.raises(RuntimeError) as direct:
        entry(_call_wrapper(fired=False))
    assert direct.value is failure


def test_a_fired_restart_that_never_comes_leaves_the_error_as_it_was() -> None:
    failure = RuntimeError("gloo timeout")
    assert await_pending_restart(failure, wait_s=0.1) is None  # the caller re-raises ``failure``


def test_the_in_process_restart_budget_is_a_sliding_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, item 8: at most ``max_iterations`` restarts within any ``restart_window_s`` (2 in 100 s here), on a
    fake clock. NVRx's own RetryController counts over the process' life; a fixed window would reset at its edge."""
    from nvidia_resiliency_ext.inprocess.exception import RestartAbort

    from training.resilience import inprocess

    clock = [0.0]
    monkeypatch.setattr(inprocess.time, "monotonic", lambda: clock[0])
    tracker = RestartTracker()
    initialize = inprocess._initialize_class()(tracker, 2, 100.0, 1)

    def restart_at(t: float, iteration: int = 1) -> bool:
        """Whether the layer restarts at ``t`` (False: it hands the fault on)."""
        clock[0] = t
        try:
            initialize(SimpleNamespace(iteration=iteration, world_size=2, active_world_size=2))
        except RestartAbort:
            return False
        return True

    assert restart_at(0.0, iteration=0)  # the first entry is no restart
    assert [restart_at(t) for t in (10.0, 20.0)] == [True, True]
    assert not restart_at(30.0)  # a third within 100 s of the first two
    assert tracker.abort_cause == "budget"
    assert tracker.abort_reason == (
        "3 in-process restarts within 100 s (inprocess.max_iterations = 2): handing the fault to the next layer"
    )
    # Sliding: by t=115 the restart at 10 s is out of the window (20, 30 and 115 are in: still 3)...
    assert not restart_at(115.0)
    # ... and at t=200 only 115 and 200 are within 100 s: restarts again, though 5 were counted in all
    assert restart_at(200.0)
    assert tracker.restart_times == [10.0, 20.0, 30.0, 115.0, 200.0]
