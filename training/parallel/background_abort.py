"""The abort of a failed iteration's process groups, on a thread of its own, so the restart does not wait for it idly.

NCCL's abort of a communicator takes about a second whatever it aborts (0.99 s on one H100 for a one-rank group, in
every NCCL/torch setting tried: ``benchmarks/nccl_abort.py``). NVRx runs it on its monitor thread before it raises
the restart in the training thread, so every in-process restart paid it before any of its own work. Here the
monitor thread only starts it (:func:`abort_in_background`), and the restart does what needs no process group
meanwhile (NVRx's finalize, health checks and garbage collection). An abort that leaves the groups in torch's
registry until it ends (NVRx's own) *blocks the next group*: the next iteration waits for it (:func:`await_abort`)
just before it creates its own group, because torch has one default group per process. An abort of groups already
taken out of the registry (:mod:`.detached_groups`) does not: the next iteration goes on beside it.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable

THREAD_NAME = "pg-abort"
#: How long a process that ends waits for an abort still running (NCCL's takes about a second).
EXIT_WAIT_S = 30.0

_running: threading.Thread | None = None
_blocks_next_group = True
_error: BaseException | None = None


def abort_in_background(abort: Callable[[], object], *, blocks_next_group: bool = True) -> None:
    """Start ``abort`` (the teardown of every process group) on the ``pg-abort`` thread. An abort still running from an
    earlier fault runs first: the new one starts after it, on the same thread. ``blocks_next_group``: the next
    iteration must wait for it before it creates its own group (False for groups already detached from torch)."""
    global _running, _blocks_next_group
    before = _running

    def run() -> None:
        global _error
        if before is not None:
            before.join()
        try:
            abort()
        except BaseException as exc:  # reported by await_abort, in the thread that goes on
            _error = exc

    _running = threading.Thread(target=run, name=THREAD_NAME, daemon=True)
    _blocks_next_group = blocks_next_group
    _running.start()


def running() -> bool:
    """Whether an abort started by :func:`abort_in_background` is still running."""
    return _running is not None and _running.is_alive()


def await_abort(timeout_s: float, poll_s: float = 0.005) -> float:
    """Wait for the abort started by :func:`abort_in_background` if it blocks the next group; the seconds waited (0.0
    without one, or for one that does not block: it goes on, and its error is reported once it ended).

    Polls in short joins so that an exception NVRx raises in this thread meanwhile (a new fault) arrives. Raises
    ``TimeoutError`` when the abort is still running after ``timeout_s``; an error the abort raised is printed and
    the wait ends (NVRx logs its own abort's errors and goes on the same way).
    """
    global _running
    thread = _running
    if thread is None or (not _blocks_next_group and thread.is_alive()):
        return 0.0
    t0 = time.monotonic()
    while thread.is_alive():
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(
                f"the failed iteration's process groups were still being aborted after {timeout_s:g} s (thread "
                f"{THREAD_NAME})"
            )
        thread.join(poll_s)
    _running = None
    _report_error()
    return time.monotonic() - t0


def _report_error() -> None:
    global _error
    if _error is not None:
        print(f"[parallel] the abort of the failed iteration's process groups raised {_error!r}", flush=True)
        _error = None


@atexit.register
def _join_at_exit() -> None:
    """A process that ends lets a running abort finish first (up to :data:`EXIT_WAIT_S`): NCCL's abort cut short by
    the interpreter's exit could crash the exit."""
    thread = _running
    if thread is not None and thread.is_alive():
        thread.join(EXIT_WAIT_S)
    _report_error()
