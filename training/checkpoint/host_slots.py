"""Readying one rank's two memory-tier host slots, once per (re)start, while training goes on.

The slots are mapped and page-locked (:mod:`training.checkpoint.hostbuf`, :mod:`training.checkpoint.pinning`) on a
thread of its own: seconds for an 11 GB snapshot, which the loop must not wait for. A snapshot that falls due before
every rank's slots are ready waits for a later step (the ranks agree, since the peer copies are collective). How long
each part took is printed by rank 0 and kept as the ``mem_prepare`` event.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

from training.checkpoint.hostbuf import Slot, take_times
from training.telemetry.events import EventLog


class HostSlots:
    """The readying of rank ``rank``'s slots in ``directory``. ``before``: run on the thread first (the run's id kept
    before the first snapshot carries it); ``report(step, message)``: a failure, reported when it happens."""

    def __init__(
        self,
        directory: Path,
        rank: int,
        events: EventLog,
        *,
        before: Callable[[], None],
        report: Callable[[int, str], None],
    ) -> None:
        self.dir, self.rank, self.events = directory, rank, events
        self.before, self.report = before, report
        self._thread: threading.Thread | None = None
        self._ready = False  # every rank's slots mapped (:meth:`ready`)

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self, nbytes: int, how: str, *, wait: bool) -> None:
        """Map and page-lock both slots for snapshots of ``nbytes`` (``how`` they are copied, for the log line), on a
        thread; ``wait`` for it (nothing to page-lock without CUDA: milliseconds)."""
        self._thread = threading.Thread(target=self._map, args=(nbytes, how), name="memtier-prepare")
        self._thread.start()
        if wait:
            self._thread.join()

    def ready(self, agree: Callable[[list[float]], list[float]]) -> bool:
        """Whether every rank's slots are ready (``agree``: the element-wise maximum over the ranks; collective
        until it is true)."""
        if not self._ready:
            mine = 0.0 if self._thread is not None and not self._thread.is_alive() else 1.0
            self._ready = agree([mine])[0] == 0.0
        return self._ready

    def join(self) -> None:
        assert self._thread is not None, "start() first"
        self._thread.join()

    def _map(self, nbytes: int, how: str) -> None:
        self.before()
        t0 = time.perf_counter()
        take_times()
        for k in (0, 1):
            try:
                Slot(self.dir, self.rank, k).data(nbytes)
            except OSError as exc:
                self.report(0, f"no host memory for the snapshots ({nbytes} bytes in {self.dir}): {exc}")
                return
        took, parts = time.perf_counter() - t0, take_times()
        if self.rank != 0:
            return
        print(
            f"[checkpoint] memory tier: {nbytes / (1 << 30):.2f} GiB a snapshot, {how}; host slots mapped in "
            f"{took:.2f} s (pages reserved {parts.get('reserve', 0.0):.2f} s, page tables filled "
            f"{parts.get('populate', 0.0):.2f} s, page-locked {parts.get('register', 0.0):.2f} s in "
            f"{int(parts.get('pieces', 0))} pieces)",
            flush=True,
        )
        with contextlib.suppress(OSError):
            fields = {k if k == "pieces" else f"{k}_s": round(v, 4) for k, v in parts.items()}
            self.events.emit("mem_prepare", nbytes=nbytes, s=round(took, 4), **fields)
