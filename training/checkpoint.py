"""Sharded DCP checkpoints with atomic commit, per-file checksums, quarantine and retention.

Directory layout under ``root``::

    step_00000050.tmp/     being written (or left behind by a crash): never loaded
    step_00000075/         committed: DCP files + ``COMMITTED`` (JSON with per-file sha256 and sizes)
    quarantine/step_00000100-<unix time>/   failed verification at load; kept for inspection

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
unconditionally). All NVRx version differences (0.4.1 here, 0.7.0 on the GPU image) live in this module.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import inspect
import json
import os
import queue
import re
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

from training.events import EventLog
from training.state import AppState

COMMIT_MARKER = "COMMITTED"
QUARANTINE_DIR = "quarantine"
TMP_SUFFIX = ".tmp"
#: Name of the background threads that hash and commit a finished write (see :func:`join_commits`).
COMMIT_THREAD = "checkpoint-commit"
#: In ``step_N.tmp/``: the checksums of the files one rank wrote, for rank 0's commit (removed by it).
RANK_SUMS = ".sha256.rank{}.json"
#: How long rank 0's commit waits for another rank's checksums.
RANK_SUMS_WAIT_S = 600.0
#: Bumped by :func:`abandon_async_saves`: a commit started before it stops waiting for other ranks.
_GENERATION = [0]
_STEP_RE = re.compile(r"^step_(\d{8})$")
_TMP_RE = re.compile(r"^step_(\d{8})\.tmp$")
#: Test/fault-injection hook: seconds each checkpoint write sleeps first (simulates slow storage).
WRITE_DELAY_ENV = "TRAINING_CKPT_WRITE_DELAY_S"


class CheckpointError(RuntimeError):
    """Base class of checkpoint errors."""


class CheckpointWriteError(CheckpointError):
    """A checkpoint could not be written or committed (ENOSPC, unwritable directory, I/O error)."""


class NoUsableCheckpointError(CheckpointError):
    """Checkpoints exist but none is loadable: refusing to restart silently from step 0."""


def step_dir_name(step: int) -> str:
    return f"step_{step:08d}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(f: Path) -> str:
    h = hashlib.sha256()
    with f.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def checksums(files: list[Path]) -> dict[str, dict[str, Any]]:
    """``{file name: {"sha256", "bytes"}}`` of ``files``."""
    return {f.name: {"sha256": _sha256(f), "bytes": f.stat().st_size} for f in files}


def file_checksums(path: Path) -> dict[str, dict[str, Any]]:
    """:func:`checksums` of every regular file of a checkpoint dir except the marker."""
    return checksums(sorted(f for f in path.iterdir() if f.name != COMMIT_MARKER and f.is_file()))


def hash_shares(files: dict[str, dict[str, Any]], world_size: int) -> list[list[str]]:
    """Split a marker's files between ``world_size`` ranks by bytes (largest first, to the least-loaded rank).

    Deterministic from the marker alone, so every rank computes the same split without communicating.
    """
    shares: list[list[str]] = [[] for _ in range(world_size)]
    load = [0] * world_size
    for name in sorted(files, key=lambda n: (-int(files[n]["bytes"]), n)):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        shares[rank].append(name)
        load[rank] += int(files[name]["bytes"])
    return shares


def own_files(path: Path, rank: int) -> list[Path]:
    """The files ``rank`` wrote into a checkpoint dir: DCP names them ``__<rank>_<n>.distcp`` (torch and NVRx);
    rank 0, the coordinator, also wrote ``.metadata``."""
    mine = [f for f in path.iterdir() if f.is_file() and f.name.startswith(f"__{rank}_")]
    if rank == 0 and (path / ".metadata").is_file():
        mine.append(path / ".metadata")
    return sorted(mine)


def publish_rank_checksums(path: Path, rank: int) -> None:
    """Hash the files ``rank`` wrote (usually still in its page cache) and leave them for rank 0's commit.

    Never raises: a failure is published as ``{"error": ...}``, so rank 0 fails the commit at once instead of
    waiting for checksums that will not come.
    """
    try:
        sums: dict[str, Any] = {
            f.name: {"sha256": _sha256(f), "bytes": f.stat().st_size} for f in own_files(path, rank)
        }
    except OSError as exc:
        sums = {"error": f"rank {rank} could not hash its files: {_describe(exc)}"}
    final = path / RANK_SUMS.format(rank)
    part = final.with_name(final.name + ".part")
    with contextlib.suppress(OSError):  # the directory is gone: rank 0 gave up on this save already
        part.write_text(json.dumps(sums))
        os.replace(part, final)


def read_marker(path: Path) -> dict[str, Any] | None:
    """The parsed commit marker of a checkpoint dir, or None when absent or unreadable."""
    try:
        marker = json.loads((path / COMMIT_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and "files" in marker else None


def storage_layout_error(path: Path) -> str | None:
    """None if ``.metadata``'s storage entries tile every data file exactly; else the reason.

    DCP writers (torch's and NVRx's, both through ``_write_item``) append items back to back, so the
    (offset, length) entries of each file cover ``[0, size)`` with no gap or overlap. Checksums cannot
    catch metadata that describes *other* bytes (seen on H200: NVRx finalized a save with the write results
    of an abandoned earlier save, and the commit checksummed an unreadable checkpoint); this does.
    """
    try:
        md = FileSystemReader(path).read_metadata()
    except Exception as exc:
        return f"unreadable .metadata ({type(exc).__name__}: {str(exc)[:200]})"
    spans: dict[str, list[tuple[int, int]]] = {}
    for info in (md.storage_data or {}).values():
        spans.setdefault(info.relative_path, []).append((int(info.offset), int(info.length)))
    data_files = {f.name for f in path.iterdir() if f.suffix == ".distcp"}
    if set(spans) != data_files:
        return f".metadata names files {sorted(spans)}, the directory holds {sorted(data_files)}"
    for name, items in sorted(spans.items()):
        end = 0
        for offset, length in sorted(items):
            if offset != end:
                return f".metadata does not match {name}: an item at byte {offset}, expected {end}"
            end = offset + length
        size = (path / name).stat().st_size
        if end != size:
            return f".metadata does not match {name}: items end at byte {end}, the file has {size}"
    return None


def verify_checkpoint(path: Path, *, share: tuple[int, int] = (0, 1), check_layout: bool = True) -> str | None:
    """None if every file listed in the marker exists with the recorded size and sha256 and ``.metadata``
    describes the data files (:func:`storage_layout_error`); else the reason.

    ``share=(rank, world_size)`` hashes only that rank's part of the files (:func:`hash_shares`), so that the
    ranks of a job verify a checkpoint together (:meth:`CheckpointManager.load_latest`); sizes are checked whole.
    """
    marker = read_marker(path)
    if marker is None:
        return "commit marker missing or unreadable"
    if ".metadata" not in marker["files"]:
        return "commit marker lists no .metadata"
    for name, want in sorted(marker["files"].items()):
        f = path / name
        if not f.is_file():
            return f"missing shard {name}"
        size = f.stat().st_size
        if size != want["bytes"]:
            return f"size mismatch in {name}: {size} bytes, expected {want['bytes']} (truncated?)"
    rank, world_size = share
    for name in sorted(hash_shares(marker["files"], world_size)[rank]):
        if _sha256(path / name) != marker["files"][name]["sha256"]:
            return f"checksum mismatch in {name} (bit flip or partial overwrite)"
    return storage_layout_error(path) if check_layout else None


def list_committed(root: Path) -> list[tuple[int, Path]]:
    """Committed checkpoints (a ``step_N`` dir with a readable marker), oldest first."""
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = _STEP_RE.match(d.name)
        if m and d.is_dir() and read_marker(d) is not None:
            found.append((int(m.group(1)), d))
    return sorted(found)


def list_partial(root: Path) -> list[tuple[int, Path]]:
    """Uncommitted dirs: ``step_N.tmp`` and ``step_N`` without a marker."""
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = _TMP_RE.match(d.name) or _STEP_RE.match(d.name)
        if m and d.is_dir() and (d.name.endswith(TMP_SUFFIX) or read_marker(d) is None):
            found.append((int(m.group(1)), d))
    return sorted(found)


def nvrx_async_available() -> bool:
    """NVRx's async DCP path needs CUDA (it calls torch.cuda unconditionally) and the package."""
    if not torch.cuda.is_available():
        return False
    try:
        import nvidia_resiliency_ext.checkpointing.async_ckpt.core  # noqa: F401
    except ImportError:
        return False
    return True


class _SlowWriter(FileSystemWriter):
    """FileSystemWriter that sleeps before writing (slow-storage fault injection)."""

    def __init__(self, path: Path, delay_s: float) -> None:
        super().__init__(path)
        self.delay_s = delay_s

    def write_data(self, plan, planner):  # type: ignore[no-untyped-def]
        time.sleep(self.delay_s)
        return super().write_data(plan, planner)


def _warm_up_worker() -> None:
    """No-op run by NVRx's persistent async worker to start it ahead of the first save."""


#: Every NVRx async path not closed yet (see :func:`abandon_async_saves`). Strong references on purpose: an
#: abandoned queue collected before its worker is reaped would finalize collectively in ``__del__``.
_LIVE_NVRX: set[_NvrxAsync] = set()

#: At most one idle NVRx writer process (``(staging, PersistentAsyncCaller)``) kept when its queue was abandoned,
#: for the next :class:`_NvrxAsync` of this process: starting a fresh one (a spawned interpreter that imports
#: torch and initialises CUDA) stalled the first save after every in-process restart by ~5 s on an H200.
_SPARE_WORKER: list[tuple[str, Any]] = []


def _stop_writer(caller: Any) -> None:
    """Kill and reap a ``PersistentAsyncCaller``'s worker, then clear it (its ``__del__`` then does nothing)."""
    process = getattr(caller, "process", None)
    if process is not None:
        process.kill()
        process.join(timeout=10)
        caller.process = None


def _take_spare_worker(staging: str) -> Any | None:
    """The parked writer if it is alive and was started for ``staging``; anything else is stopped."""
    if not _SPARE_WORKER:
        return None
    kept, caller = _SPARE_WORKER.pop()
    process = getattr(caller, "process", None)
    if kept == staging and process is not None and process.is_alive():
        return caller
    _stop_writer(caller)
    return None


def _park_writer(staging: str, caller: Any) -> None:
    """Keep an idle writer for the next :class:`_NvrxAsync` of this process (stopping any older one)."""
    while _SPARE_WORKER:
        _stop_writer(_SPARE_WORKER.pop()[1])
    _SPARE_WORKER.append((staging, caller))


def abandon_async_saves() -> int:
    """Abandon every NVRx async save of this process without collectives; returns how many paths were open.

    The in-process layer calls this after a fault and before NVRx garbage-collects the failed iteration:
    ``AsyncCallsQueue.__del__`` finalizes with an ``all_reduce`` on the default group, which hangs once
    peers are gone (seen on 2 x H200 whenever the restart interrupted the trainer's own cleanup).
    """
    _GENERATION[0] += 1  # a commit waiting for another rank's checksums stops waiting
    live = list(_LIVE_NVRX)
    for nvrx in live:
        nvrx.close(collective=False)
    if live or nvrx_async_available():
        _NvrxAsync._reset_write_results()  # even with nothing open: a dying worker may still have put a result
    return len(live)


#: How NVRx's async path stages GPU tensors (``checkpoint.nvrx_staging``).
NvrxStaging = Literal["cuda-ipc", "cuda-ipc-cached", "cpu-shm", "cpu-shm-cached"]


class _NvrxAsync:
    """The NVRx async DCP path (CUDA only), wrapping the API differences of NVRx 0.4.x-0.7.x.

    ``staging``: ``cuda-ipc`` sends CUDA IPC handles and the worker copies to host (NVRx's default);
    ``cpu-shm`` copies into shared host memory in the trainer, so the worker needs no CUDA; ``-cached``
    reuses the handles (or shm buffers) across saves of the same layout. The non-default modes need NVRx 0.7.
    """

    def __init__(self, staging: NvrxStaging = "cuda-ipc") -> None:
        from nvidia_resiliency_ext.checkpointing.async_ckpt import core

        self._core = core
        self.staging = staging
        self._writer_kwargs: dict[str, bool] = {}
        queue_kwargs: dict[str, bool] = {}
        if staging != "cuda-ipc":
            if "cpu_shm_mode" not in inspect.signature(core.AsyncCallsQueue.__init__).parameters:
                raise CheckpointError(f"checkpoint.nvrx_staging={staging!r} needs NVRx >= 0.7; use 'cuda-ipc'")
            if staging.startswith("cpu-shm"):
                queue_kwargs["cpu_shm_mode"] = True
                self._writer_kwargs["use_cpu_shm_for_gpu_tensors"] = True
            if staging.endswith("-cached"):
                self._writer_kwargs["use_cached_data_structure"] = True
        self.queue = core.AsyncCallsQueue(persistent=True, **queue_kwargs)
        #: Callers taken off the queue whose worker is not reaped yet (kept referenced: see :meth:`close`).
        self._dying: list[Any] = []
        #: True while a request is being handed to the worker (it may be busy though no call is queued yet).
        self._scheduling = False
        _LIVE_NVRX.add(self)
        spare = _take_spare_worker(staging)
        #: Whether this path reuses the idle writer of an abandoned one (an in-process restart).
        self.reused_worker = spare is not None
        if spare is not None:
            self.queue.persistent_caller = spare
            print(f"[checkpoint] reusing the idle NVRx writer process (pid {spare.process.pid})", flush=True)
            # The writer may cache tensors of the failed iteration (``-cached`` staging): make the next save
            # send this iteration's tensors, as NVRx does itself for a fresh worker.
            for callback in getattr(core.PersistentAsyncCaller, "_worker_restart_callbacks", ()):
                callback()
        # The persistent worker is a "spawn" process: starting it (a fresh interpreter importing torch and
        # initialising CUDA) took 5-10 s on an H200. Start it now with a no-op request, so that cost overlaps
        # setup and the first training steps instead of stalling the first save (seen tripping timeouts).
        # Scheduled on a reused worker too: every rank must hand over the same sequence of requests, because
        # NVRx finalizes collectively and checks that the call indices match across ranks.
        warm_up = core.AsyncRequest(async_fn=_warm_up_worker, async_fn_args=(), finalize_fns=[])
        self._schedule(warm_up)

    def _schedule(self, request: Any) -> None:
        self._scheduling = True
        self.queue.schedule_async_request(request)
        self._scheduling = False

    def pending(self) -> int:
        """Requests handed to the worker and not finalized yet (the same on every rank)."""
        return int(self.queue.get_num_unfinalized_calls())

    def schedule(self, state_dict: dict[str, Any], path: Path, finalize: Callable[[], None]) -> None:
        from nvidia_resiliency_ext.checkpointing.async_ckpt.filesystem_async import FileSystemWriterAsync
        from nvidia_resiliency_ext.checkpointing.async_ckpt.state_dict_saver import (
            save_state_dict_async_finalize,
            save_state_dict_async_plan,
        )

        writer = FileSystemWriterAsync(path, **self._writer_kwargs)
        writer, metadata, dist_wrapper = save_state_dict_async_plan(state_dict, writer)[:3]
        parts = writer.get_save_function_and_args()
        # 0.4.x-0.7.x: (save_fn, preload_fn, args); older releases: (save_fn, args).
        save_fn, preload_fn, args = parts if len(parts) == 3 else (parts[0], None, parts[1])

        def finalize_all() -> None:
            save_state_dict_async_finalize(writer, metadata, dist_wrapper)
            finalize()

        fields = self._core.AsyncRequest._fields
        kwargs: dict[str, Any] = {"async_fn": save_fn, "async_fn_args": args, "finalize_fns": [finalize_all]}
        if "preload_fn" in fields and preload_fn is not None:
            kwargs["preload_fn"] = preload_fn
        self._schedule(self._core.AsyncRequest(**kwargs))

    def finalize(self, blocking: bool, *, no_dist: bool = False) -> bool:
        """Run finalize fns of finished requests (collective); True when nothing is in flight.

        ``blocking`` first waits for this rank's writer itself, checking that the process is alive: NVRx's own
        blocking wait polls the completion queue forever once the writer has died (killed by the OOM killer,
        or, in NVRx 0.4, ended by an exception in the write). Every rank then makes the same non-blocking
        calls, each of which agrees on completion with one collective. ``no_dist`` (tests on CPU) skips that
        agreement, whose ``all_reduce`` NVRx runs on a CUDA tensor.
        """
        if not blocking:
            self.queue.maybe_finalize_async_calls(blocking=False, no_dist=no_dist)
        while blocking and self.queue.get_num_unfinalized_calls():
            self._wait_for_writer(self.queue.async_calls[0].async_caller)
            self.queue.maybe_finalize_async_calls(blocking=False, no_dist=no_dist)
        return self.queue.get_num_unfinalized_calls() == 0

    @staticmethod
    def _wait_for_writer(caller: Any, poll_s: float = 0.5) -> None:
        """Until ``caller``'s writer has completed its current request; raises if the writer process is gone.

        Takes the completion off NVRx's queue the way ``is_current_async_call_done`` does (into ``cur_item``),
        so NVRx's next check sees it.
        """
        while caller.cur_item is None:
            try:
                caller.cur_item = caller.comp_q.get(timeout=poll_s)
            except queue.Empty:
                process = caller.process
                if process is None or not process.is_alive():
                    code = None if process is None else process.exitcode
                    raise CheckpointWriteError(
                        f"the NVRx checkpoint writer process died (exit code {code}) before finishing its request"
                    ) from None

    def close(self, *, collective: bool = True) -> None:
        """Finish and stop the worker. ``collective=False`` (error path): abandon it without collectives.

        NVRx's ``AsyncCallsQueue.close()`` finalizes with an ``all_reduce`` on the default group and then
        joins the worker without a timeout; on the error path (peers gone, group aborted by the in-process
        layer) that blocked the rank until the Wrapper's hard timeout killed it (seen on 2 x H200).
        """
        if collective:
            try:
                self.finalize(blocking=True)  # NVRx's close would wait for a dead writer forever
            except CheckpointWriteError:
                self.close(collective=False)
                raise
            _LIVE_NVRX.discard(self)
            self.queue.close()
            return
        # Written so that an interruption anywhere (NVRx raises its restart exception into this thread, and
        # keeps raising while the thread unwinds) leaves nothing that finalizes collectively on garbage
        # collection, and a second call (the in-process finalize hook) completes the job:
        # - a ``PersistentAsyncCaller`` whose ``process`` is still set runs a graceful close in ``__del__``
        #   (put "DONE", then join the queue): with its worker killed that never returns (seen on 2 x H200),
        #   so the caller stays referenced in ``_dying`` until its process is reaped and cleared;
        # - the queue forgets its caller and requests, so its own ``__del__`` finalizes nothing;
        # - this path leaves the live set last.
        caller = self.queue.persistent_caller
        if caller is not None and self._idle(caller):
            # Nothing in flight (every request finalized, so nothing left in its completion queue): keep the
            # writer for the next iteration instead of paying for a fresh one.
            self.queue.persistent_caller = None
            _park_writer(self.staging, caller)
            caller = None
        if caller is not None and caller not in self._dying:
            self._dying.append(caller)
        self.queue.persistent_caller = None
        self.queue.async_calls.clear()
        while self._dying:
            _stop_writer(self._dying[0])
            self._dying.pop(0)
        self._reset_write_results()
        _LIVE_NVRX.discard(self)

    def _idle(self, caller: Any) -> bool:
        """The writer finished and every request was finalized: it waits for the next one, holding nothing."""
        process = getattr(caller, "process", None)
        return (
            not self._scheduling
            and not self.queue.async_calls
            and getattr(caller, "cur_item", None) is None
            and process is not None
            and process.is_alive()
        )

    @staticmethod
    def _reset_write_results() -> None:
        """Replace NVRx's process-wide write-results queue by a fresh one (created by the next save).

        ``FileSystemWriterAsync`` hands results over through one module-level queue and every finalize takes
        the *oldest* entry. A result of an abandoned save - already queued, or put by a worker that was dying
        while it was drained - would be taken by the next save's finalize, whose ``.metadata`` then points at
        the wrong bytes (seen on 2 x H200 after in-process restarts: a checksummed checkpoint that failed to
        unpickle, and later a commit refused by :func:`storage_layout_error`).
        """

        from nvidia_resiliency_ext.checkpointing.async_ckpt import filesystem_async

        results = getattr(filesystem_async, "_results_queue", None)
        filesystem_async._results_queue = None
        dropped = 0
        while results is not None:
            try:
                results.get_nowait()
                dropped += 1
            except queue.Empty:
                break
            except (OSError, EOFError):  # the queue's manager process is gone: nothing can be taken from it
                break
        if dropped:
            print(f"[checkpoint] dropped {dropped} stale NVRx write result(s) of an abandoned save", flush=True)


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


def _default_pg_timeout() -> datetime.timedelta | None:
    """The default process group's timeout (None = torch's default); added by H4 (resilience)."""
    with contextlib.suppress(Exception):
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))  # type: ignore[union-attr]
        return backend.options._timeout
    return None


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
        write_delay_s: float | None = None,
        nvrx_staging: NvrxStaging = "cuda-ipc",
    ) -> None:
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
        self._nvrx: _NvrxAsync | None = None
        self._closed = False
        if mode == "sync":
            self.backend = "dcp.save"
        elif nvrx_async_available():
            self.backend = f"nvrx.FileSystemWriterAsync ({nvrx_staging})"
            self._nvrx = _NvrxAsync(nvrx_staging)
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
        # Checkpoint collectives (DCP planning, commit agreement) run on their own gloo group so that an
        # async write thread never interleaves with the training collectives of the default group.
        # H4 (resilience): inherit the default group's (short) timeout; new_group's own default is 30 min, which
        # leaves a peer of a rank that faulted during restore/checkpoint blocked past the in-process hard timeout.
        self.pg = dist.new_group(backend="gloo", timeout=_default_pg_timeout()) if dist.is_initialized() else None

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
        msg = _describe(exc)
        if not msg.startswith(tuple(errno.errorcode.values())):
            # torch's C++ writers lose the errno ("file write failed"): say so when the file system is full.
            with contextlib.suppress(OSError):
                free = shutil.disk_usage(self.root).free
                if free < FULL_FS_BYTES:
                    msg = f"ENOSPC: No space left on device ({free} bytes free under {self.root}); {msg}"
        self.events.emit("ckpt_failed", step=step, error=msg, backend=self.backend)
        print(f"[checkpoint] rank {self.rank}: checkpoint at step {step} failed: {msg}", flush=True)
        err = CheckpointWriteError(f"checkpoint at step {step} failed: {msg}")
        err.__cause__ = exc
        return err

    # ------------------------------------------------------------------ save
    @property
    def in_flight(self) -> int | None:
        """Step of the save in flight, if any."""
        return self._inflight.step if self._inflight else None

    def save(self, step: int, state: AppState, *, during_write: Callable[[int], None] | None = None) -> None:
        """Checkpoint ``state`` as step ``step``.

        Blocks first until the previous save is finalized (back-pressure: at most one staged copy).
        ``during_write(step)`` is called while the write is in flight (async) or after the write and before
        the commit (sync): the fault-injection point of the checkpoint phase.
        """
        self.wait()
        t0 = time.perf_counter()
        self._emit("ckpt_begin", step=step, mode=self.mode, backend=self.backend, note=self.notice or None)
        tmp = self.root / (step_dir_name(step) + TMP_SUFFIX)
        err: BaseException | None = None
        try:
            tmp.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            err = exc
        if not self._all_ok(err is None):
            raise self._fail(step, err or OSError("checkpoint directory setup failed on another rank"))
        state_dict = {"app": state.state_dict()}
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
            self._nvrx.schedule(state_dict, tmp, lambda: self._write_done(flight))
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
            on_disk = {f.name for f in flight.tmp.iterdir() if f.is_file() and not f.name.startswith(".sha256.")}
            unhashed = sorted(on_disk - files.keys() - {COMMIT_MARKER})
            if unhashed:
                raise CheckpointError(f"refusing to commit {flight.tmp}: no rank hashed {', '.join(unhashed[:5])}")
            for rank in range(1, self.world_size):
                (flight.tmp / RANK_SUMS.format(rank)).unlink()
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
            _fsync_dir(flight.tmp)
            final = self.root / step_dir_name(flight.step)
            if final.exists():  # an older, replaced copy of the same step (e.g. after allow_fresh_start)
                shutil.rmtree(final)
            os.replace(flight.tmp, final)
            _fsync_dir(self.root)
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
        an in-process restart began, or after :data:`RANK_SUMS_WAIT_S`)."""
        path = flight.tmp / RANK_SUMS.format(rank)
        deadline = time.monotonic() + RANK_SUMS_WAIT_S
        while not path.is_file():
            if flight.abandoned or flight.generation != _GENERATION[0]:
                raise CheckpointError(f"save of step {flight.step} was abandoned; not committed")
            if time.monotonic() > deadline:
                raise CheckpointError(f"rank {rank} published no checksums within {RANK_SUMS_WAIT_S:.0f} s")
            time.sleep(0.05)
        sums = json.loads(path.read_text())
        if "error" in sums:
            raise CheckpointError(sums["error"])
        return sums

    def _retention(self, newest: int) -> None:
        committed = list_committed(self.root)
        for _, path in committed[: -self.keep_last]:
            shutil.rmtree(path, ignore_errors=True)
        for step, path in list_partial(self.root):
            if step <= newest:  # partial leftovers of earlier (crashed) saves
                shutil.rmtree(path, ignore_errors=True)

    def maybe_finalize(self) -> None:
        """Non-blocking poll (call every step on every rank): finalizes a finished async save."""
        # Whatever is pending, the warm-up request included (the same on every rank): finalizing it early makes
        # the writer idle, and so reusable after an in-process restart.
        if self._nvrx is not None and self._nvrx.pending():
            self._nvrx.finalize(blocking=False)
        if self._inflight is not None and self._inflight.done.is_set() and self._inflight.error is None:
            self._inflight = None

    def wait(self) -> None:
        """Block until the in-flight save is finalized; raise :class:`CheckpointWriteError` everywhere if it failed."""
        flight, self._inflight = self._inflight, None
        err: BaseException | None = None
        if flight is not None:
            if self._nvrx is not None:
                try:
                    self._nvrx.finalize(blocking=True)
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
                listing = {"candidates": [(step, str(path)) for step, path in reversed(list_committed(self.root))]}
            except OSError as exc:
                listing = {"error": f"cannot read checkpoint root {self.root}: {_describe(exc)}"}
        listing = self._broadcast(listing)
        if "error" in listing:
            return listing
        for step, name in listing["candidates"]:
            reason = self._verify_together(Path(name))
            if reason is None:
                return {"step": step, "path": name}
            if self.rank == 0:
                try:
                    self._quarantine(step, Path(name), reason)
                except OSError as exc:  # the next restore verifies it again
                    print(f"[checkpoint] could not quarantine {name} ({reason}): {_describe(exc)}", flush=True)
        choice: dict[str, Any] = {}
        if self.rank == 0:
            quarantined = sorted(p.name for p in (self.root / QUARANTINE_DIR).glob("step_*"))
            if quarantined and not allow_fresh_start:
                choice = {"error": f"no usable checkpoint in {self.root}; quarantined: {', '.join(quarantined)}"}
            else:
                choice = {"step": None, "quarantined": quarantined}
        return self._broadcast(choice)

    def _verify_together(self, path: Path) -> str | None:
        """:func:`verify_checkpoint` with the hashing split between the ranks; the same answer on every rank.

        Rank 0's commit, which hashes the same bytes, held the loop ~10 s for the 1B model (11.7 GB) on an H200
        host; at 8B (~100 GB) on FSx a restore verified by rank 0 alone would wait minutes. Split, each rank
        reads 1/world_size of the bytes (``python -m benchmarks.restore_verify``).
        """
        try:
            reason = verify_checkpoint(path, share=(self.rank, self.world_size), check_layout=self.rank == 0)
        except OSError as exc:
            reason = f"unreadable: {_describe(exc)}"
        if self.pg is None:
            return reason
        reasons: list[str | None] = [None] * self.world_size
        dist.all_gather_object(reasons, reason, group=self.pg)
        return next((r for r in reasons if r), None)

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
        metadata = FileSystemReader(path).read_metadata()
        source = state.prepare_load(metadata.state_dict_metadata.keys())
        state_dict = {"app": state.state_dict()}
        dcp.load(state_dict, storage_reader=FileSystemReader(path), process_group=self.pg)
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


def _describe(exc: BaseException) -> str:
    """One line naming the cause, e.g. ``ENOSPC: No space left on device`` (unwraps DCP's CheckpointException)."""
    seen: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.append(e)
        failures = getattr(e, "failures", None)
        if isinstance(failures, dict):
            for v in failures.values():  # DCP wraps each rank's error as (exception, traceback)
                inner = v[0] if isinstance(v, tuple) and v else getattr(v, "exception", v)
                if isinstance(inner, BaseException):
                    stack.append(inner)
        stack.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    for e in seen:
        if isinstance(e, OSError) and e.errno is not None:
            return f"{errno.errorcode.get(e.errno, e.errno)}: {e.strerror} ({type(e).__name__})"
    # No errno: torch's C++ writers raise RuntimeError("... file write failed" / "No space left on device").
    inner = [e for e in seen if not isinstance(e, DcpCheckpointException)]
    for e in inner:
        for code, text in _ERRNO_TEXT.items():
            if text in str(e):
                return f"{code}: {text} ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
    cause = inner[0] if inner else exc
    return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"[:500]


#: A write failure without an errno on a file system with less free space than this is reported as ENOSPC.
FULL_FS_BYTES = 1 << 20
#: OS error texts that a wrapped (errno-less) message may carry.
_ERRNO_TEXT = {"ENOSPC": "No space left on device", "EROFS": "Read-only file system", "EACCES": "Permission denied"}
