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
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from typing import Any

from training.common.terminated import Terminated

__all__ = ["GRACE_S", "TERMINATED_EXIT_CODE", "Terminated", "install"]

#: What a shell reports for a process ended by SIGTERM; the trainer exits with it after a clean stop, so the pod's
#: supervisor reads "stopped", never a fault of this node.
TERMINATED_EXIT_CODE = 128 + signal.SIGTERM
#: Seconds the main thread has to take SIGTERM before the watcher ends the process.
GRACE_S = 1.0

_taken = threading.Event()
_sockets: tuple[socket.socket, socket.socket] | None = None  # kept open for the life of the process


def _on_sigterm(signum: int, frame: Any) -> None:
    _taken.set()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the clean-up must not be cut short by a second SIGTERM
    raise Terminated("SIGTERM: stopping at once, after this rank's in-flight checkpoint write")


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
