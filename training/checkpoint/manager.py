"""Sharded DCP checkpoints with atomic commit, per-file checksums, quarantine and retention.

The directory layout and the integrity checks are in :mod:`training.checkpoint.files`; NVRx's async path
and its rough edges in :mod:`training.checkpoint.nvrx_async`.

Commit protocol: every rank writes its ``.distcp`` files into ``step_N.tmp/``; DCP's coordinator writes
``.metadata`` only after gathering every rank's write result, so once rank 0's save has returned, all ranks
have written. Every rank then hashes the files it wrote (still in its page cache, so no rank reads another's
bytes back from shared storage) and publishes the sums in ``.sha256.rank<r>.json``; rank 0 merges them,
refuses a file no rank hashed, writes ``COMMITTED`` (fsync), renames the directory to ``step_N/`` (fsync of
the parent) and applies retention. For async saves this runs on a thread of its own (``checkpoint-commit``)
once the write has finished, so the training loop goes on; the next save and every restore wait for it. At
restore the ranks verify the newest checkpoint together, each hashing its share of the files
(:func:`hash_shares`).

Backends: ``sync`` = ``dcp.save``; ``async`` = NVRx ``FileSystemWriterAsync`` + persistent
``AsyncCallsQueue`` on CUDA, and torch's ``dcp.async_save`` on CPU (NVRx's async path calls CUDA
unconditionally).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.api import CheckpointException as DcpCheckpointException
from torch.distributed.tensor import DTensor

from training.checkpoint.errors import (
    CheckpointError,
    CheckpointReadError,
    CheckpointRootMissingError,
    CheckpointWriteError,
    MarkerReadError,
    NoUsableCheckpointError,
)
from training.checkpoint.files import (
    COMMIT_MARKER,
    QUARANTINE_DIR,
    TMP_SUFFIX,
    checksums,
    describe_error,
    fsync_dir,
    is_rank_sums,
    list_committed,
    list_partial,
    list_step_dirs,
    os_error_in,
    own_files,
    publish_rank_checksums,
    rank_sums_file,
    read_marker,
    step_dir_name,
    storage_layout_error,
    verify_checkpoint,
)
from training.checkpoint.nvrx_async import NvrxAsync, NvrxStaging, abandon_nvrx_saves, nvrx_async_available
from training.checkpoint.state import AppState
from training.checkpoint.storage import likely_cause
from training.telemetry.events import EventLog, read_events

#: Name of the background threads that hash and commit a finished write (see :func:`join_commits`).
COMMIT_THREAD = "checkpoint-commit"
#: How long a rank waits for the other ranks' part of an async save (their checksums, their NVRx writes).
PEER_WAIT_S = 600.0
#: Bumped by :func:`abandon_async_saves`: a commit started before it stops waiting for other ranks.
_GENERATION = [0]
#: Test/fault-injection hook: seconds each checkpoint write sleeps first (simulates slow storage).
WRITE_DELAY_ENV = "TRAINING_CKPT_WRITE_DELAY_S"
#: Test/fault-injection hook: an errno name (e.g. ``EIO``) that every read of checkpoint data by ``dcp.load`` fails
#: with (a storage that lists and verifies, then fails the load: DCP raises its BaseException).
READ_ERROR_ENV = "TRAINING_CKPT_READ_ERROR"


class _SlowWriter(FileSystemWriter):
    """FileSystemWriter that sleeps before writing (slow-storage fault injection)."""

    def __init__(self, path: Path, delay_s: float) -> None:
        super().__init__(path)
        self.delay_s = delay_s

    def write_data(self, plan, planner):  # type: ignore[no-untyped-def]
        time.sleep(self.delay_s)
        return super().write_data(plan, planner)


class _FailingReader(FileSystemReader):
    """FileSystemReader whose data reads fail with ``errno_name`` (storage fault injection)."""

    def __init__(self, path: Path, errno_name: str) -> None:
        super().__init__(path)
        self.errno = getattr(errno, errno_name)

    def read_data(self, plan, planner):  # type: ignore[no-untyped-def]
        raise OSError(self.errno, f"{os.strerror(self.errno)} (injected by {READ_ERROR_ENV})")


def _reader(path: Path) -> FileSystemReader:
    injected = os.environ.get(READ_ERROR_ENV)
    return _FailingReader(path, injected) if injected else FileSystemReader(path)


@dataclass
class _InFlight:
    step: int
    tmp: Path
    t_begin: float
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    future: Any = None
    #: Set when the manager gave up on this save (error path): a late completion must not commit it.
    abandoned: bool = False
    #: The thread that hashes (and on rank 0 commits) a finished async write (see ``_write_done``).
    commit_thread: threading.Thread | None = None
    #: :data:`_GENERATION` when the save began.
    generation: int = field(default_factory=lambda: _GENERATION[0])


class CheckpointManager:
    """Saves and restores :class:`AppState` under ``root``; at most one save in flight.

    Collective: construct, :meth:`save`, :meth:`wait` and :meth:`load_latest` on every rank at the same point.
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
        nvrx: NvrxAsync | None = None,
    ) -> None:
        """``nvrx``: the NVRx async path to use in ``async`` mode instead of choosing one (tests drive NVRx's writer
        on CPU tensors through it)."""
        if mode not in ("sync", "async"):
            raise ValueError(f"checkpoint mode must be 'sync' or 'async', got {mode!r}")
        if keep_last < 1:
            raise ValueError("keep_last must be >= 1")
        self.root = Path(root)
        self.mode = mode
        self.keep_last = keep_last
        self.events = events
        self.rank = rank
        self.world_size = world_size
        self.write_delay_s = float(os.environ.get(WRITE_DELAY_ENV, "0")) if write_delay_s is None else write_delay_s
        self._inflight: _InFlight | None = None
        self._nvrx: NvrxAsync | None = None
        self._closed = False
        #: Bytes of this rank's part of the newest save (to tell a full file system from another failure).
        self._save_bytes: int | None = None
        if mode == "sync":
            self.backend = "dcp.save"
        elif nvrx is not None or nvrx_async_available():
            self._nvrx = nvrx or NvrxAsync(nvrx_staging)
            self.backend = f"nvrx.FileSystemWriterAsync ({self._nvrx.staging})"
        else:
            self.backend = "torch.dcp.async_save"
        self.notice = ""
        if mode == "async" and self._nvrx is None:
            self.notice = (
                "no CUDA: NVRx async DCP (FileSystemWriterAsync + AsyncCallsQueue) needs CUDA, "
                "using torch.distributed.checkpoint.async_save instead"
            )
            if rank == 0:
                print(f"[checkpoint] {self.notice}", flush=True)
        # Checkpoint collectives (DCP planning, commit agreement, restore) run on their own gloo group so that an
        # async write thread never interleaves with the training collectives of the default group. Its deadline is
        # explicit (``training.parallel.distributed.checkpoint_timeout_s``): NVRx cannot abort gloo, and without
        # one new_group takes torch's 30-minute default whenever the default group is NCCL.
        self.collective_timeout_s = collective_timeout_s
        timeout = datetime.timedelta(seconds=collective_timeout_s)
        self.pg = dist.new_group(backend="gloo", timeout=timeout) if dist.is_initialized() else None

    # ------------------------------------------------------------------ helpers
    def _emit(self, event: str, **fields: Any) -> None:
        if self.rank == 0:
            self.events.emit(event, **fields)

    def _all_ok(self, ok: bool) -> bool:
        """True iff ``ok`` on every rank (collective on the checkpoint group)."""
        if self.pg is None:
            return ok
        t = torch.tensor([0 if ok else 1], dtype=torch.int64)
        dist.all_reduce(t, group=self.pg)
        return int(t.item()) == 0

    def _broadcast(self, obj: Any) -> Any:
        if self.pg is None:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.pg)
        return box[0]

    def _writer(self, path: Path) -> FileSystemWriter:
        return _SlowWriter(path, self.write_delay_s) if self.write_delay_s > 0 else FileSystemWriter(path)

    def _fail(self, step: int, exc: BaseException) -> CheckpointWriteError:
        msg = describe_error(exc)
        cause = likely_cause(exc, self.root, self._save_bytes)  # torch's C++ writers often lose the errno
        if cause is not None:
            msg = f"{msg}; {cause}"
        with contextlib.suppress(OSError):  # the event log may sit on the same full file system
            self.events.emit("ckpt_failed", step=step, error=msg, backend=self.backend)
        print(f"[checkpoint] rank {self.rank}: checkpoint at step {step} failed: {msg}", flush=True)
        err = CheckpointWriteError(f"checkpoint at step {step} failed: {msg}")
        err.__cause__ = exc
        return err

    def _read_failed(self, step: int, message: str) -> CheckpointReadError:
        """A storage error while restoring ``step`` (``ckpt_failed`` with ``op=restore``); the checkpoint is kept."""
        with contextlib.suppress(OSError):  # the event log may sit on the same failing file system
            self.events.emit("ckpt_failed", step=step, error=message, op="restore", backend=self.backend)
        print(f"[checkpoint] rank {self.rank}: restore of step {step} failed: {message}", flush=True)
        return CheckpointReadError(f"restore of step {step} failed: {message}")

    # ------------------------------------------------------------------ save
    @property
    def in_flight(self) -> int | None:
        """Step of the save in flight, if any."""
        return self._inflight.step if self._inflight else None

    def save(self, step: int, state: AppState, *, during_write: Callable[[int], None] | None = None) -> None:
        """Checkpoint ``state`` as step ``step``.

        Blocks first until the previous save is finalized (back-pressure: at most one staged copy); that wait is
        ``backpressure_s`` of ``ckpt_begin`` and part of the save's ``stall_s``.
        ``during_write(step)`` is called while the write is in flight (async) or after the write and before
        the commit (sync): the fault-injection point of the checkpoint phase.
        """
        t0 = time.perf_counter()  # the stall includes the wait for the previous write (back-pressure)
        self.wait()
        note, wait_s = self.notice or None, round(time.perf_counter() - t0, 6)
        self._emit("ckpt_begin", step=step, mode=self.mode, backend=self.backend, note=note, backpressure_s=wait_s)
        tmp = self.root / (step_dir_name(step) + TMP_SUFFIX)
        err: BaseException | None = None
        try:
            tmp.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            err = exc
        if not self._all_ok(err is None):
            raise self._fail(step, err or OSError("checkpoint directory setup failed on another rank"))
        state_dict = {"app": state.state_dict()}
        self._save_bytes = _local_bytes(state_dict)
        if self.mode == "sync":
            self._save_sync(step, tmp, t0, state_dict, during_write)
        elif self._nvrx is not None:
            self._save_nvrx(step, tmp, t0, state_dict, during_write)
        else:
            self._save_torch_async(step, tmp, t0, state_dict, during_write)

    def _save_sync(self, step, tmp, t0, state_dict, during_write) -> None:  # type: ignore[no-untyped-def]
        err: BaseException | None = None
        try:
            dcp.save(state_dict, storage_writer=self._writer(tmp), process_group=self.pg)
        except (Exception, DcpCheckpointException) as exc:
            err = exc
        if not self._all_ok(err is None):
            raise self._fail(step, err or OSError("checkpoint write failed on another rank"))
        if during_write is not None:
            during_write(step)
        flight = _InFlight(step, tmp, t0)
        if self.rank == 0:
            self._commit(flight)
        else:
            publish_rank_checksums(tmp, self.rank)
        if not self._all_ok(flight.error is None):
            raise self._fail(step, flight.error or OSError("commit failed on rank 0"))
        # The loop goes on only now: a synchronous save stalls it for the write *and* the commit (its hashing
        # took ~10 s of the 24 s a 1B-model save blocked on 2 x H200).
        self._emit("ckpt_staged", step=step, stall_s=round(time.perf_counter() - t0, 6))

    def _save_torch_async(self, step, tmp, t0, state_dict, during_write) -> None:  # type: ignore[no-untyped-def]
        flight = _InFlight(step, tmp, t0)
        try:
            fut = dcp.async_save(state_dict, storage_writer=self._writer(tmp), process_group=self.pg)
        except (Exception, DcpCheckpointException) as exc:  # staging failed (e.g. out of host memory)
            raise self._fail(step, exc) from exc
        flight.future = fut

        self._inflight = flight
        fut.add_done_callback(lambda f: self._write_done(flight, f.result))
        self._staged(flight, during_write)

    def _save_nvrx(self, step, tmp, t0, state_dict, during_write) -> None:  # type: ignore[no-untyped-def]
        flight = _InFlight(step, tmp, t0)
        assert self._nvrx is not None
        try:
            self._nvrx.schedule(state_dict, tmp, lambda: self._write_done(flight), write_delay_s=self.write_delay_s)
        except (Exception, DcpCheckpointException) as exc:
            raise self._fail(step, exc) from exc
        self._inflight = flight
        self._staged(flight, during_write)

    def _write_done(self, flight: _InFlight, check: Callable[[], Any] | None = None) -> None:
        """Async write finished (``check`` re-raises its error): rank 0 commits; ``flight`` records the outcome.

        NVRx runs this on the training thread (inside :meth:`maybe_finalize`), so the hashing and rank 0's
        commit run on a thread of their own: inline, rank 0 hashing every file stopped the loop for ~10 s per
        save of the 1B model (11.7 GB) on 2 x H200. Each rank hashes only the files it wrote, so no rank reads
        another's bytes back from shared storage. ``flight.done`` is set when this rank's part has finished.
        """
        try:
            if check is not None:
                check()
            if flight.abandoned:
                raise CheckpointError(f"save of step {flight.step} was abandoned; not committed")
        except BaseException as exc:
            flight.error = exc
            flight.done.set()
            return
        thread = threading.Thread(target=self._commit_then_done, args=(flight,), name=COMMIT_THREAD, daemon=True)
        flight.commit_thread = thread
        thread.start()

    def _commit_then_done(self, flight: _InFlight) -> None:
        """Every rank hashes the files it wrote; rank 0 then commits with all ranks' checksums."""
        try:
            if self.rank == 0:
                self._commit(flight)
            else:
                publish_rank_checksums(flight.tmp, self.rank)
        finally:
            flight.done.set()

    def _staged(self, flight: _InFlight, during_write: Callable[[int], None] | None) -> None:
        """The loop may continue: record the stall, then run the ``checkpoint``-phase fault point if any."""
        stall = round(time.perf_counter() - flight.t_begin, 6)
        self._emit("ckpt_staged", step=flight.step, stall_s=stall, backend=self.backend)
        if during_write is not None:
            during_write(flight.step)

    def _commit(self, flight: _InFlight) -> None:
        """Rank 0: checksums (its own files, then every other rank's), marker, rename, retention. Records errors
        on ``flight`` (never raises)."""
        try:
            if not (flight.tmp / ".metadata").is_file():
                raise OSError(errno.EIO, f"{flight.tmp} has no .metadata: the write did not complete")
            files = checksums(own_files(flight.tmp, 0))
            for rank in range(1, self.world_size):
                files.update(self._rank_checksums(flight, rank))
            on_disk = {f.name for f in flight.tmp.iterdir() if f.is_file() and not is_rank_sums(f.name)}
            unhashed = sorted(on_disk - files.keys() - {COMMIT_MARKER})
            if unhashed:
                raise CheckpointError(f"refusing to commit {flight.tmp}: no rank hashed {', '.join(unhashed[:5])}")
            for rank in range(1, self.world_size):
                rank_sums_file(flight.tmp, rank).unlink()
            layout = storage_layout_error(flight.tmp)
            if layout is not None:
                raise CheckpointError(f"refusing to commit {flight.tmp}: {layout}")
            marker = {
                "step": flight.step,
                "world_size": self.world_size,
                "backend": self.backend,
                "committed_at": time.time(),
                "files": files,
            }
            tmp_marker = flight.tmp / (COMMIT_MARKER + ".part")
            with tmp_marker.open("w") as fh:
                json.dump(marker, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp_marker, flight.tmp / COMMIT_MARKER)
            fsync_dir(flight.tmp)
            final = self.root / step_dir_name(flight.step)
            if final.exists():  # an older copy of the same step (e.g. after allow_fresh_start): kept, not deleted
                self._quarantine(flight.step, final, "replaced by a new save of the same step")
            os.replace(flight.tmp, final)
            fsync_dir(self.root)
            write_s = time.perf_counter() - flight.t_begin
            self._emit(
                "ckpt_committed",
                step=flight.step,
                write_s=round(write_s, 6),
                path=str(final),
                bytes=sum(f["bytes"] for f in files.values()),
                backend=self.backend,
            )
            self._retention(flight.step)
        except BaseException as exc:
            flight.error = exc

    def _rank_checksums(self, flight: _InFlight, rank: int) -> dict[str, Any]:
        """Rank 0: the checksums ``rank`` published for ``flight`` (polls; gives up when the save is abandoned,
        an in-process restart began, or after :data:`PEER_WAIT_S`)."""
        path = rank_sums_file(flight.tmp, rank)
        deadline = time.monotonic() + PEER_WAIT_S
        while not path.is_file():
            if flight.abandoned or flight.generation != _GENERATION[0]:
                raise CheckpointError(f"save of step {flight.step} was abandoned; not committed")
            if time.monotonic() > deadline:
                raise CheckpointError(f"rank {rank} published no checksums within {PEER_WAIT_S:.0f} s")
            time.sleep(0.05)
        sums = json.loads(path.read_text())
        if "error" in sums:
            raise CheckpointError(sums["error"])
        return sums

    def _retention(self, newest: int) -> None:
        """Remove committed checkpoints beyond ``keep_last`` and unfinished saves up to ``newest``. A checkpoint whose
        marker is missing, damaged or unreadable is left alone (the next restore verifies or quarantines it)."""
        committed = []
        for _, path in list_step_dirs(self.root):
            try:
                if read_marker(path) is not None:
                    committed.append(path)
            except MarkerReadError as exc:
                print(f"[checkpoint] retention leaves {path} alone: {exc}", flush=True)
        for path in committed[: -self.keep_last]:
            shutil.rmtree(path, ignore_errors=True)
        for step, path in list_partial(self.root):
            if step <= newest:  # partial leftovers of earlier (crashed) saves
                shutil.rmtree(path, ignore_errors=True)

    def maybe_finalize(self) -> None:
        """Non-blocking poll (call every step on every rank): finalizes a finished async save."""
        # Whatever is pending, the warm-up request included (the same on every rank): finalizing it early makes
        # the writer idle, and so reusable after an in-process restart.
        if self._nvrx is not None and self._nvrx.pending():
            try:
                self._nvrx.finalize(blocking=False)
            except (Exception, DcpCheckpointException) as exc:  # a failed write; DCP's exception is a BaseException
                flight, self._inflight = self._inflight, None
                if flight is not None:
                    flight.error = flight.error or exc
                    flight.done.set()
                raise self._fail(flight.step if flight else -1, exc) from exc
        if self._inflight is not None and self._inflight.done.is_set() and self._inflight.error is None:
            self._inflight = None

    def wait(self) -> None:
        """Block until the in-flight save is finalized; raise :class:`CheckpointWriteError` everywhere if it failed."""
        flight, self._inflight = self._inflight, None
        err: BaseException | None = None
        if flight is not None:
            if self._nvrx is not None:
                try:
                    self._nvrx.finalize(blocking=True, agree=self._all_ok, wait_s=PEER_WAIT_S)
                except (Exception, DcpCheckpointException) as exc:
                    flight.error = flight.error or exc
                    flight.done.set()
            flight.done.wait()
            _join_dcp_threads()
            err = flight.error
        if not self._all_ok(err is None):
            step = flight.step if flight else -1
            raise self._fail(step, err or OSError("async checkpoint write failed on another rank"))

    def close(self, *, collective: bool = True) -> None:
        """Finalize the in-flight save and release resources; idempotent.

        ``collective=False`` (on an error path, peers may be gone): wait only for this rank's own write
        (rank 0 still commits a complete checkpoint) and never raise.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if collective:
                self.wait()
            elif self._inflight is not None:
                flight, self._inflight = self._inflight, None
                # The NVRx worker is killed below, so an unfinished write can never commit; a finished one whose
                # commit has started is let finish (nothing lost).
                flight.abandoned = self._nvrx is not None
                if self._nvrx is None or flight.commit_thread is not None:
                    flight.done.wait()
                    _join_dcp_threads()
                if flight.error is not None:
                    self._fail(flight.step, flight.error)
        finally:
            if self._nvrx is not None:
                self._nvrx.close(collective=collective)
            if collective and self.pg is not None and dist.is_initialized():
                dist.destroy_process_group(self.pg)
            # On the error path the group is only dropped: NVRx's in-process abort destroys every group from its
            # monitor thread, and destroying it here as well would race that (or the process exits next).
            self.pg = None

    # ------------------------------------------------------------------ load
    def latest_committed(self) -> int | None:
        """Step of the newest committed checkpoint (not verified), or None."""
        committed = list_committed(self.root)
        return committed[-1][0] if committed else None

    def _quarantine(self, step: int, path: Path, reason: str) -> None:
        qdir = self.root / QUARANTINE_DIR
        qdir.mkdir(parents=True, exist_ok=True)
        dest = qdir / f"{path.name}-{int(time.time() * 1000)}"
        os.replace(path, dest)
        print(f"[checkpoint] quarantined {path} -> {dest}: {reason}", flush=True)
        self.events.emit("ckpt_quarantined", step=step, reason=reason, path=str(dest))

    def _choose(self, allow_fresh_start: bool) -> dict[str, Any]:
        """The newest checkpoint that verifies (quarantining bad ones), or why there is none. Collective: rank 0
        lists the candidates, every rank hashes its share of each (:meth:`_verify_together`)."""
        listing: dict[str, Any] = {}
        if self.rank == 0:
            try:
                # A commit of this process may still run (the loop failed after the write finished): it finishes
                # first, so its checkpoint counts and its directory is not removed as a partial one under it.
                join_commits()
                for _, path in list_partial(self.root):  # no save of this job can be in flight at restore time
                    shutil.rmtree(path, ignore_errors=True)
                listing = {"candidates": [(step, str(path)) for step, path in reversed(list_step_dirs(self.root))]}
            except OSError as exc:  # a storage error, not a reason to give up on the checkpoints
                listing = {"storage": f"cannot list the checkpoint root {self.root}: {describe_error(exc)}"}
        listing = self._broadcast(listing)
        if "storage" in listing:
            raise self._read_failed(-1, listing["storage"])
        for step, name in listing["candidates"]:
            reason = self._verify_together(step, Path(name))
            if reason is None:
                return {"step": step, "path": name}
            if self.rank == 0:
                try:
                    self._quarantine(step, Path(name), reason)
                except OSError as exc:  # the next restore verifies it again
                    print(f"[checkpoint] could not quarantine {name} ({reason}): {describe_error(exc)}", flush=True)
        choice: dict[str, Any] = {}
        if self.rank == 0:
            quarantined = sorted(p.name for p in (self.root / QUARANTINE_DIR).glob("step_*"))
            lost = None if quarantined or allow_fresh_start else self._lost_commits()
            if quarantined and not allow_fresh_start:
                choice = {"error": f"no usable checkpoint in {self.root}; quarantined: {', '.join(quarantined)}"}
            elif lost is not None:
                choice = {"lost": lost}
            else:
                choice = {"step": None, "quarantined": quarantined}
        return self._broadcast(choice)

    def _lost_commits(self) -> str | None:
        """Rank 0, with no checkpoint under the root: why this cannot be a fresh start (the run's event log records
        commits), else None."""
        try:
            committed = [e for e in read_events(self.events.path.parent) if e["event"] == "ckpt_committed"]
        except FileNotFoundError:
            return None
        if not committed:
            return None
        newest = max(committed, key=lambda e: e["step"])
        state = "does not exist" if not self.root.exists() else "holds no checkpoint"
        return (
            f"the checkpoint root {self.root} {state}, but this run's event log ({self.events.path}) records "
            f"{len(committed)} committed checkpoint(s), the newest of step {newest['step']} at {newest.get('path')}. "
            "Check that the checkpoint volume is mounted (on Kubernetes: the FSx PersistentVolumeClaim) and that "
            "checkpoint.dir did not change. Refusing to start again from step 0; to start over on purpose, launch "
            "with --fresh (honoured once per run directory) or use a new run directory"
        )

    def _verify_together(self, step: int, path: Path) -> str | None:
        """:func:`verify_checkpoint` with the hashing split between the ranks; the same answer on every rank.

        None when the checkpoint verifies, else why it is damaged. A commit marker that a rank cannot read (after
        :func:`read_marker`'s retries) raises :class:`CheckpointReadError` on every rank instead: a storage error
        is no evidence of a damaged checkpoint, so the checkpoint is neither skipped nor quarantined.

        Rank 0's commit, which hashes the same bytes, held the loop ~10 s for the 1B model (11.7 GB) on an H200
        host; at 8B (~100 GB) on FSx a restore verified by rank 0 alone would wait minutes. Split, each rank
        reads 1/world_size of the bytes (``python -m benchmarks.restore_verify``).
        """
        reason: str | None = None
        storage: str | None = None
        try:
            reason = verify_checkpoint(path, share=(self.rank, self.world_size), check_layout=self.rank == 0)
        except MarkerReadError as exc:
            storage = f"rank {self.rank}: {exc}"
        except OSError as exc:
            reason = f"unreadable: {describe_error(exc)}"
        verdicts: list[tuple[str | None, str | None]] = [(reason, storage)]
        if self.pg is not None:
            verdicts = [(None, None)] * self.world_size
            dist.all_gather_object(verdicts, (reason, storage), group=self.pg)
        storage = next((s for _, s in verdicts if s), None)
        if storage is not None:
            raise self._read_failed(step, storage)
        return next((r for r, _ in verdicts if r), None)

    def load_latest(
        self,
        state: AppState,
        *,
        allow_fresh_start: bool = False,
        before_load: Callable[[int], None] | None = None,
    ) -> int | None:
        """Load the newest committed checkpoint that verifies into ``state``; return its step.

        Returns None (a fresh start) only when no checkpoint was ever committed under ``root`` or with
        ``allow_fresh_start``; raises :class:`NoUsableCheckpointError` when checkpoints exist but none loads.
        Rank 0 lists and decides, every rank verifies a share of the files, so every rank loads the same one.
        """
        if self._inflight is not None:
            raise RuntimeError("load_latest while a save is in flight")
        choice = self._choose(allow_fresh_start)
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
        path = Path(choice["path"])
        try:
            metadata = FileSystemReader(path).read_metadata()
            source = state.prepare_load(metadata.state_dict_metadata.keys())
            state_dict = {"app": state.state_dict()}
            dcp.load(state_dict, storage_reader=_reader(path), process_group=self.pg)
        except (Exception, DcpCheckpointException) as exc:  # DCP's exception is a BaseException: no restart layer
            if os_error_in(exc) is not None:  # would see it, nor the failure ledger
                raise self._read_failed(step, f"{path}: {describe_error(exc)}") from exc
            if isinstance(exc, DcpCheckpointException):
                raise CheckpointError(f"restore of step {step} from {path} failed: {describe_error(exc)}") from exc
            raise
        state.load_state_dict(state_dict["app"])
        if state.step != step:
            raise CheckpointError(f"{path} holds step {state.step}, its name says {step}")
        marker = read_marker(path) or {}
        self._emit(
            "restore",
            from_step=step,
            tier="persistent",
            path=str(path),
            saved_world_size=marker.get("world_size"),
            world_size=self.world_size,
            per_rank_source=source,
        )
        return step


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


def join_commits(timeout_s: float | None = None) -> None:
    """Wait for the background commits of this process (before listing or removing checkpoint dirs)."""
    for t in threading.enumerate():
        if t.name == COMMIT_THREAD and t is not threading.current_thread():
            t.join(timeout_s)


def _join_dcp_threads(timeout_s: float = 30.0) -> None:
    """Join torch's finished async-save worker threads (it shuts its executor down with ``wait=False``);
    a worker still alive at interpreter exit can abort the process."""
    for t in threading.enumerate():
        if t.name.startswith("AsyncCheckpointExecutor") and t is not threading.current_thread():
            t.join(timeout_s)


def abandon_async_saves() -> int:
    """Abandon this process' async saves without collectives; returns how many NVRx paths were open.

    The in-process layer calls this after a fault and before NVRx garbage-collects the failed iteration. A
    commit still waiting for another rank's checksums stops waiting.
    """
    _GENERATION[0] += 1
    return abandon_nvrx_saves()
