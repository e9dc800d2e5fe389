"""NVRx's async DCP path (``FileSystemWriterAsync`` + a persistent ``AsyncCallsQueue``; CUDA only).

Every NVRx version difference (0.4.1 in CI, 0.7.0 on the GPU image) and every rough edge met on H200s is handled
here: the writer process started ahead of the first save and reused across in-process restarts, abandoning
without collectives, stale write results, and a dead writer failing the wait instead of hanging it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from training.checkpoint.errors import CheckpointError, CheckpointWriteError
from training.checkpoint.save_copy import PreloadThenWrite, SaveCopy, kept_save_copy
from training.checkpoint.snapshot import split

#: Seconds between the polls of a blocking finalize (each poll costs one agreement collective).
FINALIZE_POLL_S = 0.2


def nvrx_async_available() -> bool:
    """NVRx's async DCP path needs CUDA (it calls torch.cuda unconditionally) and the package."""
    if not torch.cuda.is_available():
        return False
    try:
        import nvidia_resiliency_ext.checkpointing.async_ckpt.core  # noqa: F401
    except ImportError:
        return False
    return True


def _warm_up_worker() -> None:
    """No-op run by NVRx's persistent async worker to start it ahead of the first save."""


def _warm_writer(sizes: tuple[int, ...], tensors: tuple[torch.Tensor, ...], results: Any = None) -> None:
    """Run in NVRx's writer ahead of the first save, so that its hand-over costs what later ones do.

    Allocates and frees page-locked buffers of ``sizes`` bytes: torch's caching host allocator then holds them when
    the save copies the same tensors to host (``tensor.to("cpu", non_blocking=True)`` in ``preload_tensors``). On an
    H200 the first copy of 5.85 GB took 3.63 s with a cold cache and 0.107-0.12 s warm. ``tensors`` (the trainer's,
    through CUDA IPC) are only received: sharing and opening their IPC handles the first time made the first save's
    hand-over wait 2.8-3.7 s more. They are released when this returns. ``results`` (NVRx's write-results queue,
    a proxy of a manager process) and the import of NVRx's writer module are what else a first save's unpickling
    meets for the first time.
    """
    import nvidia_resiliency_ext.checkpointing.async_ckpt.filesystem_async  # noqa: F401

    buffers = [torch.empty(n, dtype=torch.uint8, pin_memory=True) for n in sizes]
    del buffers, tensors, results


#: The trainer thread that warms NVRx's write-results manager (:func:`warm_results_manager`).
RESULTS_WARM_UP_THREAD = "nvrx-results-warm-up"


def warm_results_manager(results: Any) -> threading.Thread | None:
    """Have the manager process behind NVRx's write-results queue import DCP now, on a thread of the trainer.

    The manager (a spawned interpreter) imports torch and DCP only when it first unpickles a write result: the first
    write of a fresh writer then took 9.0-9.5 s to commit a 1.7 MB tiny checkpoint on an H200, against 0.27-0.30 s
    for the next, and 20.8 s for a 1B one against 12.3-13.0 s (2026-12-01). One DCP write result passes through a
    side queue of the same manager, so that nothing can reach a save's finalize, which takes the oldest entry of
    ``results``. A thread, because the put waits for those imports (11 s on an H200): done in the writer ahead of
    a save's hand-over, it stalled the tiny model's first save that long, into a false hang. Returns the thread, or
    ``None`` when ``results`` is not a proxy that knows its manager.
    """
    manager = getattr(results, "_manager", None)
    if manager is None:
        return None

    def warm() -> None:
        from torch.distributed.checkpoint.filesystem import _StorageInfo
        from torch.distributed.checkpoint.metadata import MetadataIndex
        from torch.distributed.checkpoint.storage import WriteResult

        result = WriteResult(index=MetadataIndex("warm-up"), size_in_bytes=0, storage_data=_StorageInfo("w", 0, 0))
        try:
            side = manager.Queue()
            side.put({0: [result]})
            side.get(timeout=120)
        except Exception as exc:  # a slower first write is all this costs; say so
            print(f"[checkpoint] warming NVRx's write-results manager failed: {exc!r}", flush=True)

    thread = threading.Thread(target=warm, name=RESULTS_WARM_UP_THREAD, daemon=True)
    thread.start()
    return thread


class PreloadThenRelease:
    """NVRx's preload (the writer's device-to-host copy), after which the writer lets go of the trainer's tensors.

    NVRx's writer keeps the request, and with it the preload's arguments (the trainer's tensors, received through
    CUDA IPC), until the write ends. A writer killed mid-write (at an in-process restart) then never releases them,
    and torch keeps every shared block allocated in the trainer for good: +5.6 GB of CUDA memory per such restart,
    measured on 2 x H200 with the 1B model (issue 14, item 9). After the copy nothing needs them: drop them here.
    """

    #: A request that took longer than this to reach the copy, or a copy longer than this, is logged by the writer.
    SLOW_S = 1.0

    def __init__(self, preload: Callable[[], Any]) -> None:
        self.preload: Callable[[], Any] | None = preload
        self.made_at = time.time()  # the trainer's clock; the writer runs on the same host

    def __call__(self) -> Any:
        preload, self.preload = self.preload, None
        if preload is None:
            raise CheckpointError("an NVRx preload ran twice")
        t0 = time.time()
        try:
            return preload()
        finally:
            del preload
            reach_s, copy_s = t0 - self.made_at, time.time() - t0
            if max(reach_s, copy_s) > self.SLOW_S:  # cuda-ipc: the trainer waits for both (its handoff_s)
                print(f"[checkpoint] NVRx writer: the request reached the copy after {reach_s:.2f} s (CUDA IPC "
                      f"handles opened), the device-to-host copy took {copy_s:.2f} s", flush=True)  # fmt: skip


def device_tensors(state_dict: Any) -> list[torch.Tensor]:
    """Each device (non-CPU) tensor of a state dict, DTensors by their local shard: what a save copies to host."""
    return [t for t in split(state_dict).local if t.device.type != "cpu"]


def _delayed_write(delay_s: float, save_fn: Callable[..., None], *args: Any) -> None:
    """Slow-storage fault injection on NVRx's path: the writer process sleeps ``delay_s``, then writes."""
    time.sleep(delay_s)
    save_fn(*args)


#: Every NVRx async path not closed yet (see :func:`abandon_nvrx_saves`). Strong references on purpose: an
#: abandoned queue collected before its worker is reaped would finalize collectively in ``__del__``.
_LIVE_NVRX: set[NvrxAsync] = set()


@dataclass
class ParkedWriter:
    """An NVRx writer process (a ``PersistentAsyncCaller``) kept across an in-process restart for the next
    :class:`NvrxAsync` of this process: starting a fresh one (a spawned interpreter that imports torch and
    initialises CUDA) stalled the first save after every in-process restart by ~5.5 s on an H200.

    ``stale``: requests of the abandoned iteration that the writer had not completed when it was parked (a write
    in flight, or its own start-up's warm-up requests). It finishes them first, in order; their completions are no
    one's to finalize and are taken off its queue by :meth:`settle`. ``results``: the abandoned iteration's NVRx
    write-results queue, kept referenced until then (its manager process shuts down when the last reference goes,
    and a write putting its results into a dead queue would kill the writer).
    """

    staging: str
    caller: Any
    stale: int = 0
    results: Any = None

    def settle(self, wait_s: float = 0.0) -> bool:
        """Take the stale completions off the writer's queue, waiting up to ``wait_s``; True once none is left.
        Raises :class:`CheckpointWriteError` if the writer process died first."""
        deadline = time.monotonic() + wait_s
        while self.stale:
            with contextlib.suppress(queue.Empty):
                self.caller.comp_q.get(timeout=FINALIZE_POLL_S if wait_s > 0 else 0)
                self.stale -= 1
                continue
            if not self.caller.process.is_alive() and self.caller.comp_q.empty():
                raise CheckpointWriteError(
                    f"the NVRx checkpoint writer process died (exit code {self.caller.process.exitcode}) while "
                    "finishing the writes of the iteration before the restart"
                )
            if time.monotonic() >= deadline:
                return False
        self.results = None
        return True


#: At most one NVRx writer process kept when its queue was abandoned (see :class:`ParkedWriter`).
_SPARE_WORKER: list[ParkedWriter] = []
#: How long a save waits for a reused writer to finish the abandoned iteration's writes before it fails (the
#: normal back-pressure wait on a save in flight has the same bound, ``commit.PEER_WAIT_S``).
STALE_WRITE_WAIT_S = 600.0


def plan_save(state_dict: dict[str, Any], writer: Any, cache: Any) -> tuple[Any, Any, Any]:
    """NVRx's save plan of ``state_dict`` for ``writer``, reusing ``cache`` (a ``CheckpointMetadataCache``).

    Without a cache every save plans anew with a collective (``reduce_scatter`` of the plans; 0.28-0.33 s per 1B
    save on 2 x H200, most of the stall left after the warm-up). With one, NVRx compares each save's central plan
    with the previous one and, once two agree, later saves skip the collective and reuse the central plan
    (``enable_cache``). The cache belongs to one :class:`NvrxAsync`, so it never outlives a (re)start whose world
    or model layout could differ. Returns NVRx's ``(writer, metadata, dist_wrapper)``.
    """
    from nvidia_resiliency_ext.checkpointing.async_ckpt.state_dict_saver import save_state_dict_async_plan

    return save_state_dict_async_plan(state_dict, writer, enable_cache=True, metadata_cache=cache)[:3]


def _stop_writer(caller: Any) -> None:
    """Kill and reap a ``PersistentAsyncCaller``'s worker, then clear it (its ``__del__`` then does nothing)."""
    process = getattr(caller, "process", None)
    if process is not None:
        process.kill()
        process.join(timeout=10)
        caller.process = None


def _take_spare_worker(staging: str) -> ParkedWriter | None:
    """The parked writer if it is alive and was started for ``staging``; anything else is stopped."""
    if not _SPARE_WORKER:
        return None
    parked = _SPARE_WORKER.pop()
    process = getattr(parked.caller, "process", None)
    if parked.staging == staging and process is not None and process.is_alive():
        return parked
    _stop_writer(parked.caller)
    return None


def _park_writer(parked: ParkedWriter) -> None:
    """Keep a writer for the next :class:`NvrxAsync` of this process (stopping any older one)."""
    while _SPARE_WORKER:
        _stop_writer(_SPARE_WORKER.pop().caller)
    _SPARE_WORKER.append(parked)


def abandon_nvrx_saves() -> int:
    """Abandon every NVRx async save of this process without collectives; returns how many paths were open.

    ``AsyncCallsQueue.__del__`` finalizes with an ``all_reduce`` on the default group, which hangs once peers
    are gone (seen on 2 x H200 whenever an in-process restart interrupted the trainer's own cleanup).
    """
    live = list(_LIVE_NVRX)
    for nvrx in live:
        nvrx.close(collective=False)
    if live or nvrx_async_available():
        reset_write_results()  # even with nothing open: a dying worker may still have put a result
    if torch.cuda.is_initialized():  # blocks a writer has released wait in torch's IPC limbo until collected
        torch.cuda.ipc_collect()
    return len(live)


def reset_write_results() -> None:
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


def writer_done(caller: Any) -> bool:
    """Whether ``caller``'s writer has completed its current request (without waiting); raises if the writer
    process is gone before completing it.

    Takes the completion off NVRx's queue the way ``is_current_async_call_done`` does (into ``cur_item``), so
    NVRx's next check sees it.
    """
    if caller.cur_item is not None:
        return True
    try:
        caller.cur_item = caller.comp_q.get_nowait()
        return True
    except queue.Empty:
        pass
    process = caller.process
    if process is not None and process.is_alive():
        return False
    try:  # a completion put just before the process ended may still be on its way
        caller.cur_item = caller.comp_q.get(timeout=FINALIZE_POLL_S)
        return True
    except queue.Empty:
        code = None if process is None else process.exitcode
        raise CheckpointWriteError(
            f"the NVRx checkpoint writer process died (exit code {code}) before finishing its request"
        ) from None


#: How NVRx's async path stages GPU tensors (``checkpoint.nvrx_staging``).
NvrxStaging = Literal["cuda-ipc", "cuda-copy", "cuda-ipc-cached", "cpu-shm", "cpu-shm-cached"]


class NvrxAsync:
    """The NVRx async DCP path (CUDA only), wrapping the API differences of NVRx 0.4.x-0.7.x.

    ``staging``: ``cuda-ipc`` sends CUDA IPC handles and the worker copies to host (NVRx's default) while the
    trainer waits; ``cuda-copy`` sends handles of a copy made on the GPU first (:mod:`.save_copy`), so the trainer
    does not wait for the worker's copy (``cuda-ipc`` where the GPU has no room for it); ``cpu-shm`` copies into
    shared host memory in the trainer, so the worker needs no CUDA; ``-cached`` reuses the handles (or shm buffers)
    across saves of the same layout. ``cpu-shm`` and ``-cached`` need NVRx 0.7.
    ``write_threads``: NVRx's ``thread_count`` (``checkpoint.write_threads``).
    """

    def __init__(self, staging: NvrxStaging = "cuda-ipc", *, write_threads: int = 1) -> None:
        from nvidia_resiliency_ext.checkpointing.async_ckpt import core
        from nvidia_resiliency_ext.checkpointing.async_ckpt.state_dict_saver import CheckpointMetadataCache

        self._core = core
        self.staging = staging
        #: NVRx writer kwargs: ``thread_count`` (forked writer processes, one file each) and the staging flags.
        self._writer_kwargs: dict[str, Any] = {"thread_count": write_threads}
        queue_kwargs: dict[str, bool] = {}
        #: The GPU copy saves are handed from (``cuda-copy``), kept by the process across restarts.
        self.save_copy: SaveCopy | None = kept_save_copy() if staging == "cuda-copy" else None
        if staging not in ("cuda-ipc", "cuda-copy"):
            if "cpu_shm_mode" not in inspect.signature(core.AsyncCallsQueue.__init__).parameters:
                raise CheckpointError(f"checkpoint.nvrx_staging={staging!r} needs NVRx >= 0.7; use 'cuda-ipc'")
            if staging.startswith("cpu-shm"):
                queue_kwargs["cpu_shm_mode"] = True
                self._writer_kwargs["use_cpu_shm_for_gpu_tensors"] = True
            if staging.endswith("-cached"):
                self._writer_kwargs["use_cached_data_structure"] = True
        self.queue = core.AsyncCallsQueue(persistent=True, **queue_kwargs)
        #: This path's save-plan cache (:func:`plan_save`); a fresh one at every (re)start.
        self.plan_cache = CheckpointMetadataCache()
        #: Callers taken off the queue whose worker is not reaped yet (kept referenced: see :meth:`close`).
        self._dying: list[Any] = []
        #: True while a request is being handed to the worker (it may be busy though no call is queued yet).
        self._scheduling = False
        #: Where the last :meth:`schedule` spent the loop's time: ``plan_s`` (NVRx's save plan, a collective) and
        #: ``handoff_s`` (queueing the request and, unless the save was copied first, waiting for the writer's
        #: device-to-host copy), and with ``cuda-copy`` ``gpu_copy_s`` (the copy on the GPU).
        self.last_timings: dict[str, float] = {}
        _LIVE_NVRX.add(self)
        #: The writer of an abandoned path (an in-process restart) that this one reuses, with what it still owes
        #: the abandoned iteration; ``None`` for a fresh writer.
        self.parked = _take_spare_worker(staging)
        self.reused_worker = self.parked is not None
        if self.parked is not None:
            self.queue.persistent_caller = self.parked.caller
            pid, owed = self.parked.caller.process.pid, self.parked.stale
            owes = f", which first finishes {owed} request(s) of the iteration before" if owed else ""
            print(f"[checkpoint] reusing the NVRx writer process (pid {pid}){owes}", flush=True)
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

    def warm_host_memory(self, state_dict: dict[str, Any]) -> bool:
        """Have the writer get ready for saves of ``state_dict``'s layout (see :func:`_warm_writer`). Collective in
        order: every rank calls it at the same point, as for any request. Only for ``cuda-`` staging (the writer
        copies device tensors); returns whether a request was sent."""
        tensors = tuple(device_tensors(state_dict)) if self.staging.startswith("cuda-") else ()
        if not tensors:
            return False
        sizes = tuple(t.numel() * t.element_size() for t in tensors)
        if self.save_copy is not None:  # the saves hand over views of the copy, made later: its handle then
            tensors = ()
        from nvidia_resiliency_ext.checkpointing.async_ckpt import filesystem_async

        # The queue each save's write results come back through: its manager process starts now, not in a save.
        results = getattr(filesystem_async, "get_write_results_queue", filesystem_async._get_write_results_queue)()
        warm_results_manager(results)
        args = (sizes, tensors, results)
        self._schedule(self._core.AsyncRequest(async_fn=_warm_writer, async_fn_args=args, finalize_fns=[]))
        return True

    def _schedule(self, request: Any) -> None:
        self._scheduling = True
        self.queue.schedule_async_request(request)
        self._scheduling = False

    def pending(self) -> int:
        """Requests handed to the worker and not finalized yet (the same on every rank)."""
        return int(self.queue.get_num_unfinalized_calls())

    def schedule(
        self, state_dict: dict[str, Any], path: Path, finalize: Callable[[], None], *, write_delay_s: float = 0.0
    ) -> None:
        """Hand a save of ``state_dict`` to ``path`` to the writer; ``finalize`` runs once every rank has written.
        ``write_delay_s``: the writer sleeps that long first (slow-storage fault injection)."""
        from nvidia_resiliency_ext.checkpointing.async_ckpt.filesystem_async import FileSystemWriterAsync
        from nvidia_resiliency_ext.checkpointing.async_ckpt.state_dict_saver import save_state_dict_async_finalize

        t_plan = time.perf_counter()
        if not self._settled(STALE_WRITE_WAIT_S):  # before the plan's collective: every rank gets here
            raise CheckpointWriteError(
                f"the reused NVRx writer did not finish the writes of the iteration before the restart within "
                f"{STALE_WRITE_WAIT_S:g} s"
            )
        t_settled = time.perf_counter()
        handed = self.save_copy.handed(state_dict) if self.save_copy is not None else None
        t_copied = time.perf_counter()
        writer = FileSystemWriterAsync(path, **self._writer_kwargs)
        writer, metadata, dist_wrapper = plan_save(state_dict if handed is None else handed, writer, self.plan_cache)
        parts = writer.get_save_function_and_args()
        # 0.4.x-0.7.x: (save_fn, preload_fn, args); older releases: (save_fn, args).
        save_fn, preload_fn, args = parts if len(parts) == 3 else (parts[0], None, parts[1])
        if write_delay_s > 0 and save_fn is not None:
            save_fn = functools.partial(_delayed_write, write_delay_s, save_fn)

        def finalize_all() -> None:
            save_state_dict_async_finalize(writer, metadata, dist_wrapper)
            finalize()

        fields = self._core.AsyncRequest._fields
        kwargs: dict[str, Any] = {"async_fn": save_fn, "async_fn_args": args, "finalize_fns": [finalize_all]}
        if "preload_fn" in fields and preload_fn is not None:
            if handed is not None and save_fn is not None:  # the writer copies to host after the hand-over
                kwargs["async_fn"] = PreloadThenWrite(PreloadThenRelease(preload_fn), save_fn)
            else:
                kwargs["preload_fn"] = PreloadThenRelease(preload_fn)
        t_handoff = time.perf_counter()
        self._schedule(self._core.AsyncRequest(**kwargs))
        self.last_timings = {
            "plan_s": round(t_handoff - t_copied, 6),
            "handoff_s": round(time.perf_counter() - t_handoff, 6),
        }
        if self.save_copy is not None:
            self.last_timings["gpu_copy_s"] = round(t_copied - t_settled, 6)
        if t_settled - t_plan > 0.001:
            self.last_timings["stale_wait_s"] = round(t_settled - t_plan, 6)

    def finalize(
        self,
        blocking: bool,
        *,
        no_dist: bool = False,
        agree: Callable[[bool], bool] | None = None,
        wait_s: float = 600.0,
    ) -> bool:
        """Run finalize fns of finished requests (collective); True when nothing is in flight.

        Non-blocking: NVRx's own check, one collective. ``blocking`` polls every :data:`FINALIZE_POLL_S` instead
        of spinning NVRx's collective: whether this rank's writer finished (raising if the process died: NVRx's
        own blocking wait polls forever once the writer is gone, killed by the OOM killer or, in NVRx 0.4, ended
        by an exception in the write), then ``agree(done)`` (True when every rank's writer finished; one
        collective per poll, on every rank) before NVRx's finalize. Without ``agree``, NVRx's collective is the
        agreement. Gives up with :class:`CheckpointWriteError` after ``wait_s`` worth of polls: a count of
        polls, not a clock, so that with ``agree`` every rank gives up at the same poll. ``no_dist`` (tests on
        CPU) skips NVRx's agreement, whose ``all_reduce`` runs on a CUDA tensor.
        """
        if not blocking:
            if self.queue.async_calls and not self._settled():
                # The writer still finishes the iteration before's requests: this rank's answer to the one
                # agreement NVRx's own check makes (every rank makes it at the same points) is "still writing".
                if not no_dist:
                    self.queue.async_calls[0].async_caller.sync_all_async_calls(True)
                return False
            self.queue.maybe_finalize_async_calls(blocking=False, no_dist=no_dist)
            return self.queue.get_num_unfinalized_calls() == 0
        done = False
        for _ in range(max(1, round(wait_s / FINALIZE_POLL_S))):
            if not self.queue.get_num_unfinalized_calls():
                return True
            done = self._settled() and writer_done(self.queue.async_calls[0].async_caller)
            if agree(done) if agree is not None else done:
                self.queue.maybe_finalize_async_calls(blocking=False, no_dist=no_dist)
            else:
                time.sleep(FINALIZE_POLL_S)
        if not self.queue.get_num_unfinalized_calls():
            return True
        state = "finished" if done else "still writing"
        raise CheckpointWriteError(
            f"the async checkpoint write did not finish on every rank within {wait_s:g} s (this rank's writer: {state})"
        )

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
        owed = self._owed(caller)
        if owed is not None:
            # Keep the writer for the next iteration instead of paying for a fresh one; it first finishes what it
            # owes this one (a write in flight, its own warm-up), whose completions the next path takes off.
            from nvidia_resiliency_ext.checkpointing.async_ckpt import filesystem_async

            results = filesystem_async._results_queue if owed else None
            self.queue.persistent_caller = None
            _park_writer(ParkedWriter(self.staging, caller, owed, results))
            caller = None
        if caller is not None and caller not in self._dying:
            self._dying.append(caller)
        self.queue.persistent_caller = None
        self.queue.async_calls.clear()
        while self._dying:
            _stop_writer(self._dying[0])
            self._dying.pop(0)
        reset_write_results()
        _LIVE_NVRX.discard(self)

    def _settled(self, wait_s: float = 0.0) -> bool:
        """Whether a reused writer has finished the iteration before's requests (see :class:`ParkedWriter`)."""
        return self.parked is None or self.parked.settle(wait_s)

    def _owed(self, caller: Any) -> int | None:
        """Requests of this path that ``caller``'s writer has not completed, if it can be kept: alive, not in the
        middle of a hand-over (whether the request went out is unknown), and not still finishing an earlier
        iteration's writes (a writer stuck in a write is kept over one restart at most). ``None``: stop it."""
        process = getattr(caller, "process", None)
        if self._scheduling or process is None or not process.is_alive():
            return None
        try:
            if not self._settled():
                return None
        except CheckpointWriteError:
            return None
        owed = len(self.queue.async_calls) - (caller.cur_item is not None)
        caller.cur_item = None  # a completion taken for this path's head request is not the next path's
        return owed
