"""The checkpoint manager: storage saves through one backend, the memory tier, and the restore across the tiers.

The parts: :mod:`.backends` (the save backends behind one interface), :mod:`.commit` (the commit protocol over the
on-disk format of :mod:`.files`), :mod:`.restore` (storage restore), :mod:`.memtier` (host-memory snapshots and peer
copies). Restore order: the memory tier (own memory, ``/dev/shm``, a peer's copy) when it holds a step every rank
can get that is not older than the newest committed storage checkpoint, else storage (also for resharding).
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch.distributed as dist

from training.checkpoint.backends import make_backend, write_delay
from training.checkpoint.collectives import wait_for_ranks
from training.checkpoint.commit import COMMIT_THREAD, abandon_commits, join_commits, remove_unfinished
from training.checkpoint.errors import CheckpointRootMissingError, CheckpointWriteOverdueError, NoUsableCheckpointError
from training.checkpoint.files import list_committed
from training.checkpoint.memtier import MemoryTier
from training.checkpoint.nvrx_async import NvrxAsync, NvrxStaging, abandon_nvrx_saves
from training.checkpoint.restore import StorageRestore
from training.checkpoint.saves import DRAIN_POLL_S, KeepAlive, StorageSaves
from training.checkpoint.state import AppState
from training.telemetry.events import EventLog

__all__ = ["COMMIT_THREAD", "CheckpointManager", "abandon_async_saves", "join_commits"]


class CheckpointManager:
    """Saves and restores :class:`AppState` under ``root``; at most one storage save in flight.

    Collective: construct, :meth:`save`, :meth:`snapshot`, :meth:`wait` and :meth:`load_latest` on every rank at the
    same point. ``memory_interval_steps`` > 0 or ``"auto"`` turns the memory tier on (``memory_overhead_budget`` and
    ``memory_ceiling``: the ``auto`` interval's budget and longest interval, see :mod:`.memory_interval`);
    ``per_node``: ranks per node (peer copies go to the next node). ``nvrx``: the NVRx async path to use in
    ``async`` mode instead of choosing one (tests drive NVRx's writer on CPU tensors through it).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        mode: Literal["sync", "async"],
        keep_last: int,
        events: EventLog,
        rank: int,
        world_size: int,
        *,
        collective_timeout_s: float,
        write_delay_s: float | None = None,
        nvrx_staging: NvrxStaging = "cuda-ipc",
        write_threads: int = 1,
        nvrx: NvrxAsync | None = None,
        memory_interval_steps: int | str = 0,
        memory_overhead_budget: float = 0.01,
        memory_ceiling: int = 1_000_000,
        per_node: int | None = None,
        bulk_timeout_s: float | None = None,
    ) -> None:
        if mode not in ("sync", "async"):
            raise ValueError(f"checkpoint mode must be 'sync' or 'async', got {mode!r}")
        if keep_last < 1:
            raise ValueError("keep_last must be >= 1")
        self.root, self.mode, self.keep_last, self.events = Path(root), mode, keep_last, events
        self.rank, self.world_size = rank, world_size
        self.io, self.notice = make_backend(
            mode, delay_s=write_delay(write_delay_s), nvrx=nvrx, staging=nvrx_staging, write_threads=write_threads
        )
        self.backend = self.io.name
        if self.notice and rank == 0:
            print(f"[checkpoint] {self.notice}", flush=True)
        self._closed = False
        # Checkpoint collectives (DCP planning, commit agreement, restore) run on their own gloo group so that an
        # async write thread never interleaves with the training collectives of the default group. Its deadline is
        # explicit (``training.parallel.distributed.checkpoint_timeout_s``): NVRx cannot abort gloo, and without
        # one new_group takes torch's 30-minute default whenever the default group is NCCL.
        self.collective_timeout_s = collective_timeout_s
        timeout = datetime.timedelta(seconds=collective_timeout_s)
        self.pg = dist.new_group(backend="gloo", timeout=timeout) if dist.is_initialized() else None
        # The ranks meet after their own bulk I/O (writing, hashing, reading) on a group of its own whose deadline is
        # long (``bulk_timeout_s``, the checkpoint section's bound; default: the short one), keeping alive meanwhile:
        # ranks seconds apart are no failure of the short-deadline collective that follows (issue 48).
        self.bulk_timeout_s = bulk_timeout_s or collective_timeout_s
        self.bulk_pg = (
            dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=self.bulk_timeout_s))
            if dist.is_initialized() and world_size > 1
            else None
        )
        self.io.arrive = self.arrive
        self.saves = StorageSaves(
            self.root, mode, keep_last, events, rank, world_size, self.io, self.notice, self.pg, collective_timeout_s
        )
        self.saves.arrive = self.arrive
        self.storage = StorageRestore(self.root, rank, world_size, events, self.backend, keep_last, self.arrive)
        per_node = per_node or int(os.environ.get("LOCAL_WORLD_SIZE") or world_size)
        self.memory = (
            MemoryTier(
                self.root, memory_interval_steps, rank, world_size, per_node, events,
                collective_timeout_s=collective_timeout_s, budget=memory_overhead_budget, ceiling=memory_ceiling,
                arrive=self.arrive,
            )
            if memory_interval_steps == "auto" or int(memory_interval_steps) > 0
            else None
        )  # fmt: skip
        #: ``(keepalive, timeout_s)`` for the waits on a write in flight (:meth:`drain`), which the caller's
        #: watchdogs must see as a live rank; None: :meth:`save`'s back-pressure is a plain wait.
        self.keepalive: KeepAlive | None = None

    def _emit(self, event: str, **fields: Any) -> None:
        if self.rank == 0:
            self.events.emit(event, **fields)

    def step_done(self, step: int, step_s: float) -> None:
        """Every step on every rank: the memory tier's ``auto`` interval measures it (see :mod:`.memory_interval`)."""
        if self.memory is not None:
            self.memory.step_done(step, step_s)

    def arrive(self, what: str, *, ping: bool = True) -> None:
        """After this rank's own bulk I/O: wait for every rank at the long-deadline barrier, with :attr:`keepalive`'s
        ping (``ping=False``: not from a write thread). See :func:`.collectives.wait_for_ranks`."""
        keep = self.keepalive[0] if ping and self.keepalive is not None else None
        wait_for_ranks(self.bulk_pg, what=what, rank=self.rank, timeout_s=self.bulk_timeout_s, ping=keep)

    def memory_due(self, step: int) -> bool:
        return self.memory is not None and self.memory.due(step)

    def snapshot(self, step: int, state: AppState) -> None:
        """A memory-tier snapshot of ``state`` as step ``step`` (see :mod:`.memtier`)."""
        assert self.memory is not None
        self.memory.snapshot(step, state)

    def before_optimizer_step(self) -> None:
        """Call before every optimizer step: waits for a snapshot's device-to-host copy (a no-op on CPU)."""
        if self.memory is not None:
            self.memory.before_optimizer_step()

    @property
    def in_flight(self) -> int | None:
        """Step of the storage save in flight, if any."""
        return self.saves.in_flight

    def save(self, step: int, state: AppState, *, during_write: Callable[[int], None] | None = None) -> None:
        """Checkpoint ``state`` as step ``step`` to storage (see :meth:`StorageSaves.save`). With :attr:`keepalive`
        set, its wait for the previous write (back-pressure) is a :meth:`drain`."""
        waited_s = 0.0
        if self.keepalive is not None:  # on every rank (a collective), write in flight here or not
            t0 = time.perf_counter()
            self.drain(*self.keepalive)
            waited_s = time.perf_counter() - t0
        self.saves.save(step, state, during_write=during_write, waited_s=waited_s)

    @property
    def committed_step(self) -> int | None:
        """Step of the newest save of this manager committed on every rank (None: none yet)."""
        return self.saves.committed_step

    def save_failed(self, step: int) -> None:
        """After a failed save, with nothing in flight: rank 0 removes the unfinished saves up to ``step``, so that
        the next save finds the room they took. Not collective."""
        if self.rank != 0 or self.saves.in_flight is not None:
            return
        join_commits()
        try:
            removed = remove_unfinished(self.root, step)
        except OSError as exc:  # the listing itself failed: the next save tells
            print(f"[checkpoint] could not remove the failed saves' directories: {exc}", flush=True)
            return
        if removed:
            print(f"[checkpoint] removed the unfinished save(s) of step {', '.join(map(str, removed))}", flush=True)

    def warm_up(self, state: AppState) -> None:
        """Once per (re)start, after the first optimizer step (see :meth:`StorageSaves.warm_up`); the memory tier
        sizes its buffers."""
        self.saves.warm_up(state)
        if self.memory is not None:
            self.memory.prepare(state)

    def maybe_finalize(self) -> None:
        """Call every step on every rank (see :meth:`StorageSaves.maybe_finalize`)."""
        self.saves.maybe_finalize()

    def wait(self) -> None:
        """Block until the storage save in flight is finalized; raises everywhere if it failed."""
        self.saves.wait()

    def drain(self, keepalive: Callable[[], None], timeout_s: float, *, poll_s: float = DRAIN_POLL_S) -> None:
        """Wait for the storage save in flight with the training loop's per-step poll, calling ``keepalive`` between
        polls: a run's last write can outlast its last step by minutes (a large model's), longer than the heartbeat
        and hang timeouts that watch a rank, which would kill a healthy rank and lose the write. After ``timeout_s``
        (every rank agrees) raise :class:`CheckpointWriteOverdueError`. Collective."""
        deadline = time.monotonic() + timeout_s
        while True:
            step = self.saves.in_flight
            self.saves.maybe_finalize()
            # Agreed, so that every rank polls as often (NVRx's commit ends on each rank's own thread).
            pending, expired = self.saves.agree([self.saves.in_flight is not None, time.monotonic() >= deadline])
            if not pending:
                return
            if expired:
                raise CheckpointWriteOverdueError(f"the save of step {step} did not finish within {timeout_s:g} s")
            keepalive()
            time.sleep(poll_s)

    def close(self, *, collective: bool = True) -> None:
        """Finalize the in-flight save and release resources; idempotent. After a collective close (the run is
        over) the memory tier's buffers are removed.

        ``collective=False`` (on an error path, peers may be gone): wait only for this rank's own write
        (rank 0 still commits a complete checkpoint), with :attr:`keepalive` for at most its timeout, and raise
        nothing but a SIGTERM taken meanwhile.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self.saves.close(collective=collective, keepalive=None if collective else self.keepalive)
            if collective and self.memory is not None:
                self.memory.release()
        finally:
            if self.memory is not None:
                self.memory.close(collective=collective)
            if collective and dist.is_initialized():
                for group in (self.pg, self.bulk_pg):
                    if group is not None:
                        dist.destroy_process_group(group)
            # On the error path the group is only dropped: NVRx's in-process abort destroys every group from its
            # monitor thread, and destroying it here as well would race that (or the process exits next).
            self.pg = self.bulk_pg = None

    # ------------------------------------------------------------------ load
    def latest_committed(self) -> int | None:
        """Step of the newest committed checkpoint (not verified), or None."""
        committed = list_committed(self.root)
        return committed[-1][0] if committed else None

    def load_latest(
        self,
        state: AppState,
        *,
        allow_fresh_start: bool = False,
        before_load: Callable[[int], None] | None = None,
    ) -> int | None:
        """Load the newest state every rank can get into ``state``; return its step (see the module docstring).

        Returns None (a fresh start) only when no checkpoint was ever committed under ``root`` or with
        ``allow_fresh_start``; raises :class:`NoUsableCheckpointError` when checkpoints exist but none loads.
        """
        if self.saves.in_flight is not None:
            raise RuntimeError("load_latest while a save is in flight")
        listing = self.storage.listing(self.pg)
        if self.memory is not None:
            newest = max((step for step, _ in listing["candidates"]), default=-1)
            restored = self.memory.restore(state, at_least=newest, before_load=before_load, fresh=allow_fresh_start)
            if restored is not None:
                self._emit("restore", **restored, world_size=self.world_size)
                return restored["from_step"]
        choice = self.storage.choose(self.pg, listing, allow_fresh_start)
        if "error" in choice:
            raise NoUsableCheckpointError(choice["error"])
        if "lost" in choice:
            if self.rank == 0:
                print(f"[checkpoint] {choice['lost']}", flush=True)
            raise CheckpointRootMissingError(choice["lost"])
        step = choice["step"]
        if step is None:
            detail = "allow_fresh_start" if choice.get("quarantined") else "no committed checkpoint"
            if self.rank == 0:
                print(f"[checkpoint] fresh start from step 0 ({detail}) under {self.root}", flush=True)
            self._emit("restore", from_step=0, tier="none", reason=detail)
            return None
        if before_load is not None:
            before_load(step)
        fields = self.storage.load(self.pg, state, step, Path(choice["path"]))
        self._emit("restore", from_step=step, tier="storage", **fields)
        return step


def abandon_async_saves() -> int:
    """Abandon this process' async saves without collectives; returns how many NVRx paths were open.

    The in-process layer calls this after a fault and before NVRx garbage-collects the failed iteration. A
    commit still waiting for another rank's checksums stops waiting.
    """
    abandon_commits()
    return abandon_nvrx_saves()
