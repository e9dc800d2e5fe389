"""Readying one rank's two memory-tier host slots, once per (re)start, without the training loop waiting for it.

The slots are mapped and page-locked (:mod:`training.checkpoint.hostbuf`, :mod:`training.checkpoint.pinning`) on a
thread of their own: seconds for an 11 GB snapshot. Page-locking holds the CUDA driver's lock, so whatever part of it
overlaps training steps slows them (the 1B model on an H100: about 2.7 s over the first 45 steps). At a fresh start
the trainer therefore begins it before the model is built (:func:`begin`), for the snapshot size the model implies
(:func:`training.checkpoint.snapshot.adamw_snapshot_bytes`), and the memory tier adopts those slots (:func:`adopt`);
otherwise (a restart, whose restore reads the slots first) it starts after the first optimizer step. A snapshot
that falls due before every rank's slots are ready waits for a later step (the ranks agree, since the peer copies
are collective). How long each part took is printed by rank 0 and kept as the ``mem_prepare`` event.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

from training.checkpoint.hostbuf import Slot, take_times
from training.telemetry.events import EventLog

#: Slots begun at start-up, by directory and rank, until a memory tier adopts them.
_BEGUN: dict[tuple[Path, int], HostSlots] = {}


class HostSlots:
    """The readying of rank ``rank``'s slots in ``directory``. ``before``: run on the thread first (the run's id kept
    before the first snapshot carries it); ``report(step, message)``: a failure, reported when it happens."""

    def __init__(
        self,
        directory: Path,
        rank: int,
        events: EventLog,
        *,
        report: Callable[[int, str], None],
        before: Callable[[], None] = lambda: None,
    ) -> None:
        self.dir, self.rank, self.events = directory, rank, events
        self.before, self.report = before, report
        self._begun: tuple[threading.Thread, int, dict[str, float]] | None = None  # thread, bytes, its times
        self._thread: threading.Thread | None = None
        self._ready = False  # every rank's slots mapped (:meth:`ready`)

    @property
    def started(self) -> bool:
        return self._thread is not None

    def begin(self, capacity: int) -> None:
        """Map and page-lock both slots for snapshots of up to ``capacity`` bytes on a thread, before the loop."""
        times: dict[str, float] = {}
        thread = threading.Thread(target=self._map, args=(capacity, times), name="memtier-begin")
        self._begun = (thread, capacity, times)
        thread.start()

    def start(self, nbytes: int, how: str, *, wait: bool) -> None:
        """Ready both slots for snapshots of ``nbytes`` (``how`` they are copied, for the log line) on a thread: the
        slots :meth:`begin` readied when they are large enough, else mapped now; ``wait`` for it (nothing to
        page-lock without CUDA: milliseconds)."""
        self._thread = threading.Thread(target=self._ready_for, args=(nbytes, how), name="memtier-prepare")
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

    def _map(self, nbytes: int, times: dict[str, float]) -> bool:
        """Map both slots for ``nbytes``; their times by part into ``times`` (with ``s``, the whole). False if it
        failed (reported)."""
        t0 = time.perf_counter()
        take_times()
        for k in (0, 1):
            try:
                Slot(self.dir, self.rank, k).data(nbytes)
            except OSError as exc:
                self.report(0, f"no host memory for the snapshots ({nbytes} bytes in {self.dir}): {exc}")
                return False
        times.update(take_times(), s=time.perf_counter() - t0)
        return True

    def _ready_for(self, nbytes: int, how: str) -> None:
        self.before()
        times: dict[str, float] = {}
        when, early = "after the first step", False
        if self._begun is not None:
            thread, capacity, begun = self._begun
            thread.join()
            if "s" not in begun:
                when = "after the first step (readying them at start-up failed)"
            elif capacity < nbytes:
                when = f"again after the first step (the {capacity} bytes readied at start-up were too few)"
            else:
                when, early, times = f"at start-up ({capacity} bytes)", True, begun
        if not times and not self._map(nbytes, times):
            return
        if self.rank != 0:
            return
        print(
            f"[checkpoint] memory tier: {nbytes / (1 << 30):.2f} GiB a snapshot, {how}; host slots mapped {when} in "
            f"{times['s']:.2f} s (pages reserved {times.get('reserve', 0.0):.2f} s, page tables filled "
            f"{times.get('populate', 0.0):.2f} s, page-locked {times.get('register', 0.0):.2f} s in "
            f"{int(times.get('pieces', 0))} pieces)",
            flush=True,
        )
        with contextlib.suppress(OSError):
            fields = {k if k in ("pieces", "s") else f"{k}_s": round(v, 4) for k, v in times.items()}
            self.events.emit("mem_prepare", nbytes=nbytes, early=early, **fields)


def begin(directory: Path, rank: int, capacity: int, events: EventLog) -> None:
    """Start readying rank ``rank``'s slots in ``directory`` for snapshots of up to ``capacity`` bytes, for the
    memory tier made later in this process to :func:`adopt` (see the module docstring)."""

    def report(step: int, message: str) -> None:
        print(f"[checkpoint] rank {rank}: readying the memory tier at start-up: {message}", flush=True)

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # the memory tier, made later, meets the same and says so
        report(0, f"cannot make {directory}: {exc}")
        return
    slots = HostSlots(directory, rank, events, report=report)
    _BEGUN[(directory, rank)] = slots
    slots.begin(capacity)


def adopt(
    directory: Path, rank: int, events: EventLog, *, report: Callable[[int, str], None], before: Callable[[], None]
) -> HostSlots:
    """The slots :func:`begin` started for ``directory`` and ``rank`` in this process, else new ones."""
    slots = _BEGUN.pop((directory, rank), None) or HostSlots(directory, rank, events, report=report)
    slots.report, slots.before = report, before
    return slots
