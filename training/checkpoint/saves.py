"""Storage saves: one backend (:mod:`.backends`), at most one save in flight, commits (:mod:`.commit`) on a thread.

A failed save is reported (a ``ckpt_failed`` event and a log line naming the likely cause) when it fails, and raised
on every rank together at the next :meth:`StorageSaves.maybe_finalize` (or :meth:`~StorageSaves.wait`).
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException as DcpCheckpointException
from torch.distributed.tensor import DTensor

from training.checkpoint.backends import Backend, InFlight, join_dcp_threads
from training.checkpoint.collectives import all_ok, all_sum
from training.checkpoint.commit import COMMIT_THREAD, PEER_WAIT_S, commit_save, generation, wait_rank_sums
from training.checkpoint.errors import CheckpointError, CheckpointPeerError, CheckpointWriteError
from training.checkpoint.files import (
    TMP_SUFFIX,
    describe_error,
    peer_cause,
    publish_rank_checksums,
    rank_failures,
    step_dir_name,
)
from training.checkpoint.state import AppState
from training.checkpoint.storage import likely_cause
from training.common.peer_errors import lost_peer_behind
from training.common.terminated import Terminated
from training.telemetry.events import EventLog

#: Seconds between the checks of a wait on a write in flight that keeps the rank alive (:meth:`CheckpointManager.drain`,
#: the error path's wait in :meth:`StorageSaves.close`).
DRAIN_POLL_S = 0.5
#: ``(keepalive, timeout_s)``: what a wait on a write calls between its checks, and how long it may wait.
KeepAlive = tuple[Callable[[], None], float]


class StorageSaves:
    """This rank's storage saves under ``root`` through ``io``. Collective on the checkpoint group ``pg``: every rank
    calls :meth:`save`, :meth:`maybe_finalize` and :meth:`wait` at the same points."""

    def __init__(
        self, root: Path, mode: str, keep_last: int, events: EventLog, rank: int, world_size: int, io: Backend,
        notice: str, pg: Any, timeout_s: float,
    ) -> None:  # fmt: skip
        self.root, self.mode, self.keep_last, self.events = root, mode, keep_last, events
        self.rank, self.world_size, self.io, self.notice, self.pg = rank, world_size, io, notice, pg
        self.backend = io.name
        # torch's async save runs collectives on ``pg`` from its write thread (the write results, the metadata): the
        # per-step agreement on a failed write (:meth:`maybe_finalize`) has a group of its own.
        self.poll_pg = (
            dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
            if pg is not None and io.asynchronous and io.nvrx is None
            else None
        )
        self._inflight: InFlight | None = None
        #: Bytes of this rank's part of the newest save (to tell a full file system from another failure).
        self._save_bytes: int | None = None
        #: Step of the newest save of this process finalized without error on every rank (None: none yet).
        self.committed_step: int | None = None
        #: Waits for every rank after this rank's own bulk I/O (:meth:`CheckpointManager.arrive`).
        self.arrive: Callable[..., None] = lambda what, ping=True: None

    def _emit(self, event: str, **fields: Any) -> None:
        if self.rank == 0:
            self.events.emit(event, **fields)

    def _fail(self, step: int, exc: BaseException) -> BaseException:
        """Report a failed save now (event and log line, with the likely cause) and return the error to raise.

        DCP gathers every rank's error onto every rank: a rank stopped (SIGTERM) inside its write gets its own
        :class:`Terminated` back (a clean stop, exit 143, not a storage fault), and the ranks whose own write was
        fine get a :class:`CheckpointPeerError` (a lost peer, exit 14): the stopped rank's pod is the one replaced.
        """
        failures = rank_failures(exc)
        own = exc if failures is None else failures.get(self.rank)
        peers_only = failures is not None and own is None and bool(failures)
        msg = describe_error(exc)
        if peers_only and all(isinstance(e, Terminated) or lost_peer_behind(e) for e in failures.values()):
            ranks = ("rank " if len(failures) == 1 else "ranks ") + ", ".join(str(r) for r in sorted(failures))
            msg = (
                f"{ranks} failed in the save, not this rank ({msg}); likely cause: another rank was stopped "
                "(an eviction, its launcher stopping it) or lost during the save; this save is given up"
            )
            kind: type[CheckpointWriteError] = CheckpointPeerError
        else:
            # torch's C++ writers often lose the errno
            cause = likely_cause(exc, self.root, self._save_bytes) or peer_cause(exc)
            msg = f"{msg}; {cause}" if cause is not None else msg
            kind = CheckpointWriteError
        with contextlib.suppress(OSError):  # the event log may sit on the same full file system
            self.events.emit("ckpt_failed", step=step, error=msg, backend=self.backend)
        print(f"[checkpoint] rank {self.rank}: checkpoint at step {step} failed: {msg}", flush=True)
        if isinstance(own, Terminated):
            return own
        err = kind(f"checkpoint at step {step} failed: {msg}")
        err.__cause__ = exc
        return err

    # ------------------------------------------------------------------ save
    @property
    def in_flight(self) -> int | None:
        """Step of the save in flight, if any."""
        return self._inflight.step if self._inflight else None

    def save(
        self, step: int, state: AppState, *, during_write: Callable[[int], None] | None = None, waited_s: float = 0.0
    ) -> None:
        """Checkpoint ``state`` as step ``step`` to storage.

        Blocks first until the previous save is finalized (back-pressure: at most one staged copy); that wait, plus
        ``waited_s`` the caller waited for it already, is ``backpressure_s`` of ``ckpt_begin`` and part of the save's
        ``stall_s`` (not of its ``write_s``).
        ``during_write(step)`` is called while the write is in flight (async) or after the write and before
        the commit (sync): the fault-injection point of the checkpoint phase.
        """
        t_wait = time.perf_counter() - waited_s
        self.wait()
        flight = InFlight(step, self.root / (step_dir_name(step) + TMP_SUFFIX), time.perf_counter())
        wait_s = round(flight.t_begin - t_wait, 6)
        note = self.notice or None
        self._emit("ckpt_begin", step=step, mode=self.mode, backend=self.backend, note=note, backpressure_s=wait_s)
        err: BaseException | None = None
        try:
            flight.tmp.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            err = exc
        if not all_ok(self.pg, err is None):
            raise self._fail(step, err or OSError("checkpoint directory setup failed on another rank"))
        t_state = time.perf_counter()
        state_dict = {"app": state.state_dict()}
        self._save_bytes = _local_bytes(state_dict)
        parts: dict[str, float] = {"state_dict_s": round(time.perf_counter() - t_state, 6)}
        try:
            self.io.start(flight, state_dict, self.pg, self._write_done)
            if self.io.nvrx is not None:
                parts.update(self.io.nvrx.last_timings)
        except (Exception, DcpCheckpointException) as exc:  # staging or (sync) the write failed
            err = exc
        if self.io.asynchronous:
            if err is not None:
                raise self._fail(step, err) from err
            self._inflight = flight
        else:
            if not all_ok(self.pg, err is None):
                raise self._fail(step, err or OSError("checkpoint write failed on another rank"))
            if during_write is not None:
                during_write(step)
            self._commit_then_done(flight)
            self.arrive("hashing and commit")  # rank 0 hashed its files and committed meanwhile
            if not all_ok(self.pg, flight.error is None):
                raise flight.reported or self._fail(step, OSError("commit failed on rank 0"))
            self.committed_step = step
            # The loop goes on only now: a synchronous save stalls it for the write *and* the commit.
        stall_s = round(time.perf_counter() - t_wait, 6)
        self._emit("ckpt_staged", step=step, stall_s=stall_s, backend=self.backend, **parts)
        if self.io.asynchronous and during_write is not None:
            during_write(step)

    def warm_up(self, state: AppState) -> None:
        """Prepare the backend for saves of ``state``'s layout (NVRx: the writer pins its host buffers now, not in
        the first save's stall). Call once per (re)start, after the first optimizer step (the optimizer state exists
        then), at the same step on every rank."""
        state_dict = {"app": state.state_dict()}
        if self.io.warm_up(state_dict) and self.rank == 0:
            mb = _local_bytes(state_dict) / 2**20
            print(f"[checkpoint] the writer pins host memory for this rank's {mb:.0f} MiB of saves", flush=True)

    def _write_done(self, flight: InFlight, check: Callable[[], Any] | None = None) -> None:
        """Async write finished (``check`` re-raises its error): hash and (rank 0) commit on a thread of their own.

        NVRx runs this on the training thread (inside :meth:`maybe_finalize`): inline, rank 0 hashing every file
        stopped the loop for ~10 s per save of the 1B model (11.7 GB) on 2 x H200. A failed write is reported here,
        when it fails; the ranks raise it together at the next :meth:`maybe_finalize`.
        """
        try:
            if flight.abandoned:  # given up on: whatever ended its write (its process group gone, say) is moot
                raise CheckpointError(f"save of step {flight.step} was abandoned; not committed")
            if check is not None:
                check()
        except BaseException as exc:
            flight.error = exc
            flight.reported = self._fail(flight.step, exc)
            flight.done.set()
            return
        thread = threading.Thread(target=self._commit_then_done, args=(flight,), name=COMMIT_THREAD, daemon=True)
        flight.commit_thread = thread
        thread.start()

    def _commit_then_done(self, flight: InFlight) -> None:
        """Every rank hashes the files it wrote; rank 0 then commits with all ranks' checksums."""
        try:
            if self.rank != 0:
                publish_rank_checksums(flight.tmp, self.rank)
                return

            def given_up() -> bool:
                return flight.abandoned or flight.generation != generation()

            commit_save(
                self.root, flight.tmp, flight.step, world_size=self.world_size, backend=self.backend,
                rank_sums=lambda r: wait_rank_sums(flight.tmp, r, given_up=given_up), events=self.events,
                keep_last=self.keep_last, t_begin=flight.t_begin,
            )  # fmt: skip
        except BaseException as exc:
            flight.error = exc
            flight.reported = self._fail(flight.step, exc)
        finally:
            flight.done.set()

    def agree(self, values: list[int | bool]) -> list[int]:
        """The element-wise sum of ``values`` over every rank, from the main thread while a save is in flight (on
        the poll's own group where torch's write thread runs collectives on ``pg``)."""
        return all_sum(self.poll_pg if self.poll_pg is not None else self.pg, values)

    def maybe_finalize(self) -> None:
        """Non-blocking poll (call every step on every rank): finalizes a finished async save; raises, on every
        rank, the error of one that failed (one small agreement per step while a save is in flight)."""
        try:
            self.io.poll()
        except (Exception, DcpCheckpointException) as exc:  # a failed write; DCP's exception is a BaseException
            flight, self._inflight = self._inflight, None
            if flight is not None:
                flight.error = flight.error or exc
                flight.done.set()
            raise self._fail(flight.step if flight else -1, exc) from exc
        flight = self._inflight
        if flight is None or (self.io.nvrx is not None and self.io.nvrx.pending()):
            return  # NVRx's finalize above is the agreement while its write runs (pending: the same on every rank)
        # Then the commit (NVRx: after its finalize handed the write over): a failed one is raised now, with its cause
        failed, running = self.agree([flight.error is not None, not flight.done.is_set()])
        if failed:
            self._inflight = None
            raise flight.reported or self._fail(flight.step, OSError("async checkpoint write failed on another rank"))
        if not running:
            self._inflight = None
            self.committed_step = flight.step

    def wait(self) -> None:
        """Block until the in-flight save is finalized; raise :class:`CheckpointWriteError` everywhere if it failed."""
        flight, self._inflight = self._inflight, None
        err: BaseException | None = None
        if flight is not None:
            try:
                self.io.drain(lambda done: all_ok(self.pg, done), PEER_WAIT_S)
            except (Exception, DcpCheckpointException) as exc:
                flight.error = flight.error or exc
                flight.done.set()
            flight.done.wait()
            join_dcp_threads()
            err = flight.error
        if not all_ok(self.pg, err is None):
            step = flight.step if flight else -1
            raise (flight and flight.reported) or self._fail(
                step, err or OSError("async checkpoint write failed on another rank")
            )
        if flight is not None:
            self.committed_step = flight.step

    def close(self, *, collective: bool, keepalive: KeepAlive | None = None) -> None:
        """Finalize the save in flight. ``collective=False`` (an error path, peers may be gone): wait only for this
        rank's own write (rank 0 still commits a complete checkpoint; see :func:`wait_own_write` for ``keepalive``)
        and raise nothing but a SIGTERM taken meanwhile (once the wait is over)."""
        finished = True
        try:
            if collective:
                self.wait()
            elif self._inflight is not None:
                flight, self._inflight = self._inflight, None
                # The NVRx worker is killed below, so an unfinished write can never commit; a finished one whose
                # commit has started is let finish (nothing lost).
                flight.abandoned = self.io.nvrx is not None
                if self.io.nvrx is None or flight.commit_thread is not None:
                    finished = wait_own_write(flight, keepalive, self.rank)
        finally:  # torch's write threads are joined here, unless a write was given up still running
            self.io.close(collective=collective, given_up=not finished)
            if collective and self.poll_pg is not None and dist.is_initialized():
                dist.destroy_process_group(self.poll_pg)
            self.poll_pg = None


def wait_own_write(flight: InFlight, keepalive: KeepAlive | None, rank: int) -> bool:
    """An error path's wait for this rank's own write (and rank 0's commit); whether it finished. With ``keepalive``
    ``(ping, timeout_s)`` it pings between checks (the rank's watchdogs, which see no step any more, killed it
    mid-wait with no cause recorded) and gives the save up after ``timeout_s``: it is never committed, and its write
    runs on until the process ends. Without, it waits as long as the write takes. A SIGTERM meanwhile (the launcher
    stopping the group when a peer exited first) does not cut the wait short: it is raised once the wait ends."""
    ping, timeout_s = keepalive if keepalive is not None else (lambda: None, float("inf"))
    deadline = time.monotonic() + timeout_s
    stopped: Terminated | None = None
    finished = True
    while True:
        try:
            if flight.done.wait(DRAIN_POLL_S):
                break
        except Terminated as exc:  # taken once (the handler ignores a second SIGTERM)
            stopped = exc
            continue
        if time.monotonic() >= deadline:
            flight.abandoned, finished = True, False
            print(
                f"[checkpoint] rank {rank}: the save of step {flight.step} is given up: its write was still running "
                f"{timeout_s:g} s into the error path's wait; it is not committed",
                flush=True,
            )
            break
        with contextlib.suppress(Exception):  # a watchdog gone already (the error path) must not end the wait
            ping()
    if stopped is not None:
        raise stopped
    return finished


def _local_bytes(obj: Any) -> int:
    """Bytes of the tensors (this rank's shards) and byte strings in a state dict."""
    if isinstance(obj, DTensor):
        obj = obj.to_local()
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, bytes):
        return len(obj)
    if isinstance(obj, dict):
        return sum(_local_bytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_local_bytes(v) for v in obj)
    return 0
