"""NVRx in-process restart: the ``inprocess.Wrapper`` built from ``cfg.inprocess``.

All NVRx version differences (the GPU image runs 0.7.0, CPU machines 0.4.1) are handled here:

- keyword arguments the installed Wrapper does not know are dropped (:func:`wrapper_kwargs`);
- 0.7.0 adds GPU/NVLink/NIC health checks whenever ``LOCAL_RANK`` is set, which raise ``NVMLError``
  without a GPU driver: on machines without CUDA they are removed again (:func:`_strip_gpu_checks`);
- the store's initial ranks come back as bytes in both versions, which poisons the termination barrier
  (:func:`fix_initial_ranks`);
- a restart NVRx already raised can be lost before the wrapped function fails (:func:`await_pending_restart`).

The abort of a fault's process groups runs on a thread of its own (``BackgroundAbort``): NCCL's abort takes about a
second. By default (``inprocess.abort: detached``) the groups are first taken out of torch's registry, so the next
iteration builds its own group beside the abort (:mod:`training.parallel.detached_groups`); ``in_place`` runs NVRx's
``AbortTorchDistributed``, and only the restart's work that needs no process group goes on meanwhile
(:mod:`training.parallel.background_abort`).

CPU/gloo pitfalls handled by the caller (``training.train``): torch.distributed must not be
initialised before the wrapped call (the wrapped function initialises it on every entry); the Wrapper's
TCPStore must not use MASTER_PORT (:func:`store_port`); gloo collectives cannot be aborted, so the gloo
timeout is short (``cfg.inprocess.gloo_timeout_s``).
"""

from __future__ import annotations

import datetime
import inspect
import logging
import os
import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.parallel import background_abort
from training.resilience.exit_codes import classify

log = logging.getLogger(__name__)

STORE_PORT_ENV = "NVRX_INPROCESS_STORE_PORT"

#: Process environment the in-process layer needs (NVRx in-process usage guide, "Known issues"), set by the
#: pod spec (``charts.efa_env``) and again by each worker before its first process group (:func:`apply_process_env`):
#:
#: - ``TORCH_NCCL_ASYNC_ERROR_HANDLING=2``: on an NCCL error the watchdog aborts the communicator but keeps the
#:   process (ft_launcher exports ``1`` to its workers, which tears the process down: the in-process restart
#:   never happens; seen on 2 x H200 as a SIGABRT of the faulting worker);
#: - ``TORCH_NCCL_RETHROW_CUDA_ERRORS=0``: the watchdog does not rethrow CUDA/NCCL errors (which kills the process);
#: - ``NCCL_NVLS_ENABLE=0``: NVLink SHARP communicators cannot be aborted and rebuilt;
#: - ``TORCH_CPP_LOG_LEVEL=error``: the Wrapper's store polling would otherwise log every expected timeout.
INPROCESS_PROCESS_ENV: dict[str, str] = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
    "TORCH_NCCL_RETHROW_CUDA_ERRORS": "0",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_CPP_LOG_LEVEL": "error",
}


def nvrx_version() -> str:
    """Installed nvidia-resiliency-ext version."""
    from importlib.metadata import version

    return version("nvidia-resiliency-ext")


def store_port(default: int) -> int:
    """The in-process TCPStore port: ``$NVRX_INPROCESS_STORE_PORT`` or ``default``; never MASTER_PORT."""
    port = int(os.environ.get(STORE_PORT_ENV, default))
    master = os.environ.get("MASTER_PORT")
    if master is not None and int(master) == port:
        raise ValueError(
            f"in-process store port {port} equals MASTER_PORT: set {STORE_PORT_ENV} or job.inprocess_store_port "
            "to another port"
        )
    return port


def apply_process_env(environ: MutableMapping[str, str] | None = None) -> dict[str, tuple[str | None, str]]:
    """Set :data:`INPROCESS_PROCESS_ENV` in ``environ`` (default ``os.environ``), overriding other values.

    Must run before the first process group is created (ProcessGroupNCCL reads these at construction).
    Returns ``{name: (old, new)}`` for every value it changed, so the caller can say so in the log.
    """
    env = os.environ if environ is None else environ
    changed = {k: (env.get(k), v) for k, v in INPROCESS_PROCESS_ENV.items() if env.get(k) != v}
    env.update(INPROCESS_PROCESS_ENV)
    return changed


@dataclass
class RestartTracker:
    """What the in-process layer saw: detection time and cause of the last fault on this rank, restart times, and
    why it gave up (``abort_cause``: ``peer_lost`` when ranks were lost, ``budget`` when restarts came too fast;
    ``abort_reason``: the message of that abort)."""

    detected_mono: float | None = None
    detected_ts: float | None = None
    cause: str | None = None
    restarts: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    restart_times: list[float] = field(default_factory=list)
    abort_cause: str | None = None
    abort_reason: str | None = None


def _initialize_class() -> type:
    from nvidia_resiliency_ext.inprocess.exception import RestartAbort
    from nvidia_resiliency_ext.inprocess.initialize import Initialize

    class WindowedRetry(Initialize):
        """NVRx ``initialize``: stop restarting in-process when ranks were lost (the world is below
        ``min_world_size``) or when more than ``max_restarts`` restarts fell within ``window_s``; records which in
        ``tracker.abort_cause`` so the trainer exits with the right code. Replaces NVRx's ``RetryController``, whose
        ``max_iterations`` counts restarts over the whole life of the process."""

        def __init__(self, tracker: RestartTracker, max_restarts: int, window_s: float, min_world_size: int) -> None:
            self.tracker = tracker
            self.max_restarts = max_restarts
            self.window_s = window_s
            self.min_world_size = min_world_size

        def __call__(self, state: Any) -> Any:
            now = time.monotonic()
            if state.iteration > 0:
                self.tracker.restart_times.append(now)
            active = min(state.world_size, state.active_world_size)
            if active < self.min_world_size:
                raise self._abort("peer_lost", f"{active} of {self.min_world_size} ranks are left: a peer was lost")
            recent = [t for t in self.tracker.restart_times if now - t < self.window_s]
            if len(recent) > self.max_restarts:
                raise self._abort(
                    "budget",
                    f"{len(recent)} in-process restarts within {self.window_s:g} s (inprocess.max_iterations = "
                    f"{self.max_restarts}): handing the fault to the next layer",
                )
            return state

        def _abort(self, cause: str, reason: str) -> RestartAbort:
            """Record why the layer stops in the tracker; the abort to raise."""
            self.tracker.abort_cause, self.tracker.abort_reason = cause, reason
            return RestartAbort(reason)

    return WindowedRetry


def _finalize_class() -> type:
    from nvidia_resiliency_ext.inprocess.finalize import Finalize

    class RecordFault(Finalize):
        """Runs on every rank after a fault was detected and the groups aborted: remember when and why, then
        run the ``on_fault`` cleanups (before NVRx garbage-collects the failed iteration's objects)."""

        def __init__(self, tracker: RestartTracker, on_fault: Sequence[Callable[[], object]]) -> None:
            self.tracker = tracker
            self.on_fault = tuple(on_fault)

        def __call__(self, state: Any) -> Any:
            exc = getattr(state, "fn_exception", None)
            self.tracker.detected_mono = time.monotonic()
            self.tracker.detected_ts = time.time()
            self.tracker.cause = classify(exc) if exc is not None else "peer_fault"
            self.tracker.history.append({"iteration": state.iteration, "cause": self.tracker.cause})
            for cleanup in self.on_fault:  # an error here ends this rank (NVRx: finalize failures are fatal)
                cleanup()
            return state

    return RecordFault


def _abort_class() -> type:
    from nvidia_resiliency_ext.inprocess.abort import Abort, AbortTorchDistributed

    from training.parallel import detached_groups

    class BackgroundAbort(Abort):
        """The teardown of every process group, started on a thread of its own by NVRx's monitor thread, which then
        raises the restart at once (:mod:`training.parallel.background_abort`). ``detached``: the groups are first
        taken out of torch's registry (:mod:`training.parallel.detached_groups`), so the next iteration need not wait
        for the abort; ``in_place``: NVRx's ``AbortTorchDistributed``, which the next iteration waits for."""

        def __init__(self, mode: str = "detached") -> None:
            self.inner = AbortTorchDistributed()
            self.detached = mode == "detached" and _can_detach(detached_groups.missing())

        def __call__(self, state: Any) -> Any:
            import torch.distributed as dist

            if self.detached and dist.is_available() and dist.is_initialized():
                try:
                    groups = detached_groups.detach()
                except Exception as exc:  # torch's registry not as expected: NVRx's own abort still ends the groups
                    print(
                        f"[inprocess] detaching the process groups failed ({exc!r}): aborting them in place", flush=True
                    )
                else:
                    background_abort.abort_in_background(lambda: detached_groups.abort(groups), blocks_next_group=False)
                    return state
            background_abort.abort_in_background(lambda: self.inner(state))
            return state

    return BackgroundAbort


def _can_detach(lacking: Sequence[str]) -> bool:
    """Whether this torch has what :mod:`training.parallel.detached_groups` needs (``lacking`` is what it has not);
    prints why not."""
    if lacking:
        print(
            f"[inprocess] inprocess.abort=detached: this torch lacks {', '.join(lacking)}; the process groups are "
            "aborted in place (NVRx's AbortTorchDistributed), and each restart waits for NCCL's abort (about 1 s)",
            flush=True,
        )
    return not lacking


def _td(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def wrapper_kwargs(wrapper_cls: type, **kwargs: Any) -> dict[str, Any]:
    """Drop keyword arguments that the installed ``Wrapper`` does not accept (logged)."""
    accepted = set(inspect.signature(wrapper_cls.__init__).parameters)
    dropped = sorted(set(kwargs) - accepted)
    if dropped:
        log.info("inprocess: NVRx %s Wrapper lacks %s; not passed", nvrx_version(), ", ".join(dropped))
    return {k: v for k, v in kwargs.items() if k in accepted}


def _strip_gpu_checks(wrapper: Any) -> None:
    """Remove 0.7.0's implicit GPU/NVLink/NIC restart health checks on machines without CUDA."""
    import torch

    if torch.cuda.is_available() or getattr(wrapper, "restart_health_check", None) is None:
        return
    from nvidia_resiliency_ext.inprocess import Compose

    checks = getattr(wrapper.restart_health_check, "instances", [wrapper.restart_health_check])
    kept = [c for c in checks if not type(c).__name__.startswith("Chained")]
    if len(kept) != len(checks):
        log.info("inprocess: no CUDA: dropped NVRx's implicit GPU/NVLink/NIC health checks")
    wrapper.restart_health_check = Compose(*kept) if kept else None


def fix_initial_ranks() -> None:
    """Make NVRx's ``StoreMixin.get_initial_ranks`` return ints (0.4.1 and 0.7.0 return the store's bytes).

    When a rank's sibling monitor finds another rank unresponsive (its heartbeat older than ``heartbeat_timeout``: a
    lost node, or a rank starved that long), it enters the termination barrier for that rank's initial rank as read
    from the store: ``b'1'`` is written to the barrier's key as the text ``"b'1'"``, and every later parse of that key
    (``int()``) raises ``ValueError``: the survivor's own termination barrier in the Wrapper's teardown, on every
    node loss of ``inprocess-ft``. The monitor process is forked from the worker after this runs, so it inherits the
    fix. Idempotent; a no-op where NVRx already returns ints.
    """
    from nvidia_resiliency_ext.inprocess import store

    original = store.StoreMixin.get_initial_ranks
    if getattr(original, "_ints", False):
        return

    def get_initial_ranks(self: Any, ranks: Any) -> list[int]:
        return [int(r.decode() if isinstance(r, bytes) else r) for r in original(self, ranks)]

    get_initial_ranks._ints = True  # type: ignore[attr-defined]
    store.StoreMixin.get_initial_ranks = get_initial_ranks


def build_wrapper(
    ip: Any,
    *,
    port: int,
    min_world_size: int,
    tracker: RestartTracker,
    log_dir: Path | None = None,
    on_fault: Sequence[Callable[[], object]] = (),
) -> Any:
    """An ``inprocess.Wrapper`` from an :class:`~platform_config.schema.InprocessConfig`.

    ``min_world_size``: below it the in-process layer stops (``tracker.abort_cause = "peer_lost"``); ``training.train``
    passes the full world size unless ``inprocess.min_world_size`` allows shrinking, so a lost rank ends the iteration
    and the group restarts at the same world size (deterministic resume). ``on_fault``: cleanups run on every rank
    after each fault, before the next iteration (e.g. abandoning async checkpoint saves).
    """
    import torch
    from nvidia_resiliency_ext import inprocess

    fix_initial_ranks()
    checks: list[Any] = []
    if torch.cuda.is_available():
        checks.append(inprocess.health_check.CudaHealthCheck(timeout=_td(ip.soft_timeout_s)))
    checks.append(inprocess.health_check.FaultCounter(max_rank_faults=ip.max_rank_faults))
    logfile = str((log_dir / "inprocess_monitor_{rank}.log").resolve()) if log_dir else None
    kwargs = wrapper_kwargs(
        inprocess.Wrapper,
        store_kwargs={"port": port, "timeout": _td(ip.barrier_timeout_s)},
        abort=_abort_class()(ip.abort),
        initialize=_initialize_class()(tracker, ip.max_iterations, ip.restart_window_s, min_world_size),
        finalize=_finalize_class()(tracker, on_fault),
        health_check=inprocess.Compose(*checks),
        # Separate intervals: NVRx's monitor process skips its timeout checks after each progress message, so it must
        # wake up far more often than the watchdog sends (docs/nvrx-monitor.md).
        monitor_thread_interval=_td(ip.monitor_thread_interval_s),
        monitor_process_interval=_td(ip.monitor_process_interval_s),
        progress_watchdog_interval=_td(ip.progress_watchdog_interval_s),
        heartbeat_interval=_td(ip.heartbeat_interval_s),
        soft_timeout=_td(ip.soft_timeout_s),
        hard_timeout=_td(ip.hard_timeout_s),
        heartbeat_timeout=_td(ip.heartbeat_timeout_s),
        barrier_timeout=_td(ip.barrier_timeout_s),
        completion_timeout=_td(ip.completion_timeout_s),
        last_call_wait=_td(ip.last_call_wait_s),
        termination_grace_time=_td(ip.termination_grace_s),
        monitor_process_logfile=logfile,
    )
    wrapper = inprocess.Wrapper(**kwargs)
    _strip_gpu_checks(wrapper)
    return wrapper


def restart_pending(call_wrapper: Any) -> bool:
    """Whether NVRx's monitor thread has already fired this iteration's restart: it asks the progress watchdog to
    pause just before it raises ``RankShouldRestart`` in the main thread, and nothing else does while the wrapped
    function runs (NVRx 0.4.1 and 0.7.0's ``monitor_thread``; False where the installed NVRx has no such flag)."""
    flag = getattr(getattr(call_wrapper, "progress_watchdog", None), "pause_requested", None)
    return flag is not None and flag.is_set()


def await_pending_restart(exc: Exception, wait_s: float, poll_s: float = 0.01) -> None:
    """With ``exc`` raised by the wrapped function after NVRx fired a restart: wait up to ``wait_s`` for that
    ``RankShouldRestart`` and raise it from ``exc``; return (the caller re-raises ``exc``) if none came.

    Seen on CPU under load (2026-12-05): a peer blocked in a gloo collective with a hung rank left it on the gloo
    timeout just as the monitor raised the soft timeout's restart, and the restart was raised inside the progress
    watchdog's ctypes callback, where Python ignores it ("Exception ignored on calling ctypes callback function").
    NVRx re-raises it from another thread, but its own handler of the function's exception stops waiting for it,
    finds no restart and raises ``InternalError``: the rank exited and ft_launcher recovered what the in-process
    layer should have. The monitor keeps raising the restart until NVRx's handler stops it, so a wait of the soft
    timeout receives it here instead.
    """
    from nvidia_resiliency_ext.inprocess.monitor_thread import RankShouldRestart

    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            time.sleep(poll_s)
    except RankShouldRestart as restart:
        raise restart from exc
    log.warning("inprocess: a restart was fired but did not arrive within %.1f s; %r goes on", wait_s, exc)


def wrap(wrapper: Any, fn: Any) -> Any:
    """``wrapper(fn)`` where ``fn(call_wrapper)`` gets NVRx's ``CallWrapper``.

    NVRx finds the parameter by its annotation object; with postponed annotations (PEP 563) it would see
    a string, so the annotation is set here explicitly. An exception of ``fn`` after NVRx fired this iteration's
    restart waits for that restart (:func:`await_pending_restart`, up to the soft timeout and a second).
    """
    from nvidia_resiliency_ext.inprocess import CallWrapper

    wait_s = wrapper.soft_timeout.total_seconds() + 1.0

    def entry(call_wrapper=None):  # type: ignore[no-untyped-def]
        try:
            return fn(call_wrapper)
        except Exception as exc:
            if restart_pending(call_wrapper):
                await_pending_restart(exc, wait_s)
            raise

    entry.__annotations__ = {"call_wrapper": CallWrapper}
    return wrapper(entry)


def is_restart_abort(exc: BaseException) -> bool:
    """True for NVRx's "stop restarting" exception (retries exhausted / world too small)."""
    return type(exc).__name__ == "RestartAbort"
