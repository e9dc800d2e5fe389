"""SIGTERM in a worker: a clean stop when the main thread can take the signal, an immediate exit when it cannot.

A pod being stopped (an eviction, the Job's end) and a launcher stopping its worker group both send SIGTERM. The
worker's Python handler raises :class:`Terminated`, so the trainer unwinds and its ``close`` lets this rank's in-flight
checkpoint write finish before the process exits 143.

Python runs signal handlers in the main thread between bytecodes only. A rank blocked in C (an NCCL collective or a
CUDA synchronisation waiting on a peer that died, a store wait) never gets there: on 2 x H200 ft_launcher's SIGTERM to
the survivor of a SIGKILLed rank went unanswered for the launcher's whole 15 s stop timeout, then SIGKILL, which added
15 s to every ft_launcher recovery without the in-process layer (2026-11-30). Here the C-level handler also writes the
signal number to a wake-up socket (``signal.set_wakeup_fd``); a watcher thread reads it, and when the main thread has
not taken the signal within ``grace_s`` it ends the process with the same code at once. Nothing is lost that a clean
stop would keep: a rank blocked on a dead peer cannot finish a checkpoint write either, and an unfinished one is never
committed.

**A final save** (issue 47): when the pod itself is being stopped (:func:`draining`: a drain or an eviction, which
the pod's supervisor marks; a SIGTERM from a launcher restarting its group after a fault elsewhere is not one), inside
:func:`deferred` (the trainer's step loop) the handler only records the request.
The rank finishes its step; the step's loss all-reduce carries every rank's flag, so all ranks, the ones no SIGTERM
reached included (Kubernetes evicts only the drained node's pod), learn it at the same step boundary, save that step
to storage together and leave (:class:`Terminated` here, :class:`PeerTerminated` on the others). The watcher bounds
it (:func:`overdue`): the step must end within ``boundary_s`` of the SIGTERM (else a peer is gone and no boundary
comes) and the save within ``budget_s`` (:func:`stop_budget_s`: what the pod's grace period and the launcher leave).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from training.common.terminated import Terminated

__all__ = [
    "DRAIN_FILE_ENV",
    "GRACE_S",
    "TERMINATED_EXIT_CODE",
    "PeerTerminated",
    "StopRequest",
    "Terminated",
    "deferred",
    "draining",
    "install",
    "overdue",
    "stop_budget_s",
]

#: What a shell reports for a process ended by SIGTERM; the trainer exits with it after a clean stop, so the pod's
#: supervisor reads "stopped", never a fault of this node.
TERMINATED_EXIT_CODE = 128 + signal.SIGTERM
#: Seconds the main thread has to take SIGTERM before the watcher ends the process.
GRACE_S = 1.0
#: The file the pod's supervisor writes when the pod itself gets SIGTERM (charts/launch_command.py): a drain.
DRAIN_FILE_ENV = "TRAINING_DRAIN_FILE"
#: Seconds a launcher gives its workers between the SIGTERM it forwards and SIGKILL: torchrun's
#: (``LocalElasticAgent._shutdown``'s default, not configurable) and ft_launcher's ``--term-timeout`` default.
TORCHRUN_STOP_S = 30.0
FT_LAUNCHER_TERM_S = 1800.0
#: Seconds kept back from a final save's budget for the exit after it (the error path's close, the launcher's exit).
EXIT_MARGIN_S = 3.0


class PeerTerminated(Terminated):
    """Another rank's pod is being stopped (SIGTERM reached it, not this rank): this rank joined the final save of the
    step they agreed on and leaves as a stopped rank (exit 143: the pod's supervisor relaunches in place, the launcher
    of ft_launcher restarts its workers), to rejoin with the stopped pod's replacement."""


@dataclass
class StopRequest:
    """A SIGTERM taken while deferred (monotonic seconds): the request, and when the main thread reached the step's
    end after it; ``boundary_s``/``budget_s`` bound each (:func:`overdue`)."""

    deferring: bool = False
    requested_at: float | None = None
    boundary_at: float | None = None
    boundary_s: float = math.inf
    budget_s: float = math.inf

    def reached_boundary(self) -> None:
        if self.requested_at is not None and self.boundary_at is None:
            self.boundary_at = time.monotonic()

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the request (0: none)."""
        if self.requested_at is None:
            return 0.0
        return (time.monotonic() if now is None else now) - self.requested_at


def stop_budget_s(grace_s: float, *, ft_launcher: bool) -> float:
    """Seconds from SIGTERM that a final save may take: the pod's ``terminationGracePeriodSeconds`` (the charts set the
    checkpoint section timeout, ``grace_s``) or the launcher's stop timeout, whichever is shorter, less
    :data:`EXIT_MARGIN_S`."""
    launcher = FT_LAUNCHER_TERM_S if ft_launcher else TORCHRUN_STOP_S
    return max(0.0, min(grace_s, launcher) - EXIT_MARGIN_S)


def overdue(stop: StopRequest, now: float) -> str | None:
    """Why a deferred stop must end the process now, or None: the step did not end within ``boundary_s`` of the
    SIGTERM (the rank waits on a peer that is gone: no agreement will come), or the stop took its whole budget."""
    if stop.requested_at is None:
        return None
    waited = now - stop.requested_at
    if stop.boundary_at is None and waited > stop.boundary_s:
        return (
            f"the step did not end within {stop.boundary_s:g} s of SIGTERM (a collective waiting on a lost peer): no "
            "final save"
        )
    if waited > stop.budget_s:
        return f"the final save did not finish within its budget of {stop.budget_s:g} s after SIGTERM"
    return None


_stop = StopRequest()

_taken = threading.Event()
_sockets: tuple[socket.socket, socket.socket] | None = None  # kept open for the life of the process


def draining() -> bool:
    """Whether this pod is being stopped (its supervisor wrote the file named by :data:`DRAIN_FILE_ENV` on its own
    SIGTERM). A SIGTERM without it comes from the launcher restarting its worker group after a fault elsewhere: no
    final save then (the peers are gone or going), the rank stops at once as before."""
    path = os.environ.get(DRAIN_FILE_ENV)
    return bool(path) and os.path.exists(path)


def _on_sigterm(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the clean-up must not be cut short by a second SIGTERM
    if _stop.deferring and draining():  # the trainer's loop: finish the step, agree, save it (module docstring)
        _stop.requested_at = time.monotonic()
        _taken.set()
        return
    _taken.set()
    raise Terminated("SIGTERM: stopping at once, after this rank's in-flight checkpoint write")


@contextlib.contextmanager
def deferred(*, budget_s: float, boundary_s: float) -> Iterator[StopRequest]:
    """Inside: a SIGTERM is a request (:attr:`StopRequest.requested_at`) instead of :class:`Terminated` (the module
    docstring). On leaving, a request not acted on raises :class:`Terminated` (a SIGTERM after the last agreement), and
    so does an exception raised inside after a request."""
    _stop.deferring, _stop.budget_s, _stop.boundary_s = True, budget_s, boundary_s
    try:
        yield _stop
    except Exception as exc:  # a failure after the SIGTERM (a peer gone mid-step): still a stop, never a restart
        if _stop.requested_at is not None:
            raise Terminated(f"SIGTERM, then {type(exc).__name__}: {exc}") from exc
        raise
    finally:
        _stop.deferring = False
    if _stop.requested_at is not None:
        raise Terminated("SIGTERM after the last step's agreement: stopping")


def request() -> StopRequest:
    """This process's stop request (read-only use outside this module)."""
    return _stop


def _watch(sock: socket.socket, grace_s: float) -> None:
    while True:
        try:
            data = sock.recv(64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGTERM in data and not _taken.wait(grace_s):
            print(
                f"[train] SIGTERM not taken within {grace_s:g} s: the main thread is blocked outside Python (a "
                f"collective or a device call waiting on a lost peer); exiting {TERMINATED_EXIT_CODE} now",
                flush=True,
            )
            os._exit(TERMINATED_EXIT_CODE)
        if signal.SIGTERM in data and _stop.requested_at is not None:
            while (why := overdue(_stop, time.monotonic())) is None:
                time.sleep(0.1)
            print(f"[train] {why}; exiting {TERMINATED_EXIT_CODE} now", flush=True)
            os._exit(TERMINATED_EXIT_CODE)


def _forget_in_child() -> None:
    """A forked child (NVRx's monitor daemon) must neither write its own signals into this process's socket nor keep
    the socket pair open (a daemon holding a worker's sockets outlives it: test_monitor_daemon_sockets)."""
    global _sockets
    signal.set_wakeup_fd(-1)
    if _sockets is not None:
        for sock in _sockets:
            sock.close()
        _sockets = None


def install(grace_s: float = GRACE_S) -> None:
    """Install the SIGTERM handler and its watcher (main thread, once per process)."""
    global _sockets
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    os.register_at_fork(after_in_child=_forget_in_child)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _sockets = (reader, writer)
    threading.Thread(target=_watch, args=(reader, grace_s), name="sigterm-watch", daemon=True).start()
