"""The storage save backends behind one small interface, and the storage fault-injection hooks.

A backend starts the write of one save into ``step_N.tmp/`` and, for an async one, calls ``write_done(flight,
check)`` once this rank's write has finished (``check()`` re-raises its error); the manager commits
(:mod:`training.checkpoint.commit`). ``sync`` = ``dcp.save``; ``async`` = NVRx ``FileSystemWriterAsync`` + persistent
``AsyncCallsQueue`` on CUDA, torch's ``dcp.async_save`` on CPU (NVRx's async path calls CUDA unconditionally).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp
from torch.distributed._state_dict_utils import CompanionMismatch, _copy_state_dict, _create_cpu_state_dict
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

from training.checkpoint.commit import generation
from training.checkpoint.nvrx_async import NvrxAsync, NvrxStaging, nvrx_async_available

#: Fault-injection hook: seconds each checkpoint write sleeps first (simulates slow storage).
WRITE_DELAY_ENV = "TRAINING_CKPT_WRITE_DELAY_S"
#: Fault-injection hook: an errno name (e.g. ``EIO``) that every read of checkpoint data by ``dcp.load`` fails
#: with (a storage that lists and verifies, then fails the load: DCP raises its BaseException).
READ_ERROR_ENV = "TRAINING_CKPT_READ_ERROR"


class SlowWriter(FileSystemWriter):
    """FileSystemWriter that sleeps before writing (slow-storage fault injection)."""

    def __init__(self, path: Path, delay_s: float) -> None:
        super().__init__(path)
        self.delay_s = delay_s

    def write_data(self, plan, planner):  # type: ignore[no-untyped-def]
        time.sleep(self.delay_s)
        return super().write_data(plan, planner)


class FailingReader(FileSystemReader):
    """FileSystemReader whose data reads fail with ``errno_name`` (storage fault injection)."""

    def __init__(self, path: Path, errno_name: str) -> None:
        super().__init__(path)
        self.errno = getattr(errno, errno_name)

    def read_data(self, plan, planner):  # type: ignore[no-untyped-def]
        raise OSError(self.errno, f"{os.strerror(self.errno)} (injected by {READ_ERROR_ENV})")


def reader(path: Path, arrive: Callable[[], None] | None = None) -> FileSystemReader:
    """The storage reader of a restore; ``arrive`` (see :func:`then_arrive`) after this rank's reads."""
    injected = os.environ.get(READ_ERROR_ENV)
    storage = FailingReader(path, injected) if injected else FileSystemReader(path)
    if arrive is not None:
        storage.read_data = then_arrive(storage.read_data, arrive)  # type: ignore[method-assign]
    return storage


def then_arrive(io: Callable[..., Any], arrive: Callable[[], None]) -> Callable[..., Any]:
    """A storage writer's ``write_data`` or reader's ``read_data`` followed, whatever it raised, by ``arrive()``:
    the wait for the other ranks' I/O (:func:`training.checkpoint.collectives.wait_for_ranks`) before DCP gathers
    the results on the checkpoint group's short deadline."""

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            done = io(*args, **kwargs)
            done.wait()
            return done
        finally:
            arrive()

    return run


def write_delay(given: float | None) -> float:
    return float(os.environ.get(WRITE_DELAY_ENV, "0")) if given is None else given


@dataclass
class InFlight:
    step: int
    tmp: Path
    t_begin: float
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    #: Set when the manager gave up on this save (error path): a late completion must not commit it.
    abandoned: bool = False
    #: The thread that hashes (and on rank 0 commits) a finished async write.
    commit_thread: threading.Thread | None = None
    #: The error as reported when the save failed (raised by the manager's next poll or wait).
    reported: BaseException | None = None
    #: :func:`training.checkpoint.commit.generation` when the save began.
    generation: int = field(default_factory=generation)


WriteDone = Callable[[InFlight, Callable[[], Any] | None], None]


class Backend:
    """``dcp.save`` (synchronous): :meth:`start` returns once this rank's write is done (or raises)."""

    name = "dcp.save"
    asynchronous = False
    nvrx: NvrxAsync | None = None

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        #: Called after this rank's writes (``ping``: whether it may keep the rank alive: not from a write thread).
        self.arrive: Callable[..., None] | None = None

    def writer(self, path: Path) -> FileSystemWriter:
        storage = SlowWriter(path, self.delay_s) if self.delay_s > 0 else FileSystemWriter(path)
        if self.arrive is not None:
            arrive, ping = self.arrive, not self.asynchronous
            storage.write_data = then_arrive(storage.write_data, lambda: arrive("writing", ping=ping))  # type: ignore[method-assign]
        return storage

    def start(self, flight: InFlight, state_dict: dict[str, Any], pg: Any, write_done: WriteDone) -> None:
        dcp.save(state_dict, storage_writer=self.writer(flight.tmp), process_group=pg)

    def warm_up(self, state_dict: dict[str, Any]) -> bool:
        """Prepare for saves of ``state_dict``'s layout, off the training loop; whether anything was started."""
        return False

    def poll(self) -> None:
        """Non-blocking progress (every step); raises a failed write's error."""

    def drain(self, agree: Callable[[bool], bool], wait_s: float) -> None:
        """Block until this rank's write finished (collective where the backend's finalize is)."""

    def close(self, *, collective: bool, given_up: bool = False) -> None:
        """Release the backend's resources. ``given_up``: a write was given up still running (the error path)."""


class StagingCopy:
    """The CPU copy an async save stages the state into, kept for the backend's next save.

    torch's staging builds a new copy every save (``_create_cpu_state_dict``: a deepcopy of every DTensor, 38-62 ms
    for the tiny model's state on the 2-core machine); copying into the kept one took 1-2 ms. It is reused only
    once the previous save's write is over: the manager starts a save after the previous one finished (at most one
    staged copy), and a backend whose write was given up still running drops it (:meth:`TorchAsync.close`). A
    state of another layout (keys, list lengths, shapes) is staged into a new copy.
    """

    def __init__(self) -> None:
        self.copy: dict[str, Any] | None = None

    def stage(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        """``state_dict`` copied into the kept copy (tensors; other values as they are now)."""
        if self.copy is not None:
            try:
                return _copy_state_dict(state_dict, self.copy)
            except (KeyError, RuntimeError, CompanionMismatch):  # another layout
                self.copy = None
        self.copy = _create_cpu_state_dict(state_dict)
        return _copy_state_dict(state_dict, self.copy)


class TorchAsync(Backend):
    """torch's ``dcp.async_save`` (the CPU path): a staging copy (:class:`StagingCopy`), then a write thread of
    torch's."""

    name = "torch.dcp.async_save"
    asynchronous = True

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s)
        self.staging = StagingCopy()

    def writer(self, path: Path) -> FileSystemWriter:
        writer = super().writer(path)
        writer.stage = self.staging.stage  # dcp.async_save stages through its storage writer (an AsyncStager)
        return writer

    def start(self, flight: InFlight, state_dict: dict[str, Any], pg: Any, write_done: WriteDone) -> None:
        fut = dcp.async_save(state_dict, storage_writer=self.writer(flight.tmp), process_group=pg)
        fut.add_done_callback(lambda f: write_done(flight, f.result))

    def close(self, *, collective: bool, given_up: bool = False) -> None:
        if given_up:  # a write given up runs on, unjoined, until the process ends or the next close joins it
            self.staging = StagingCopy()  # and may still read the kept copy
        else:
            join_dcp_threads()


class Nvrx(Backend):
    """NVRx ``FileSystemWriterAsync`` + persistent ``AsyncCallsQueue`` (CUDA; see :mod:`.nvrx_async`)."""

    asynchronous = True

    def __init__(self, delay_s: float, nvrx: NvrxAsync) -> None:
        super().__init__(delay_s)
        self.nvrx = nvrx
        self.name = f"nvrx.FileSystemWriterAsync ({nvrx.staging})"

    def start(self, flight: InFlight, state_dict: dict[str, Any], pg: Any, write_done: WriteDone) -> None:
        assert self.nvrx is not None
        self.nvrx.schedule(state_dict, flight.tmp, lambda: write_done(flight, None), write_delay_s=self.delay_s)

    def warm_up(self, state_dict: dict[str, Any]) -> bool:
        assert self.nvrx is not None
        return self.nvrx.warm_host_memory(state_dict)

    def poll(self) -> None:
        # Whatever is pending, the warm-up request included (the same on every rank): finalizing it early makes
        # the writer idle, and so reusable after an in-process restart.
        if self.nvrx is not None and self.nvrx.pending():
            self.nvrx.finalize(blocking=False)

    def drain(self, agree: Callable[[bool], bool], wait_s: float) -> None:
        assert self.nvrx is not None
        self.nvrx.finalize(blocking=True, agree=agree, wait_s=wait_s)

    def close(self, *, collective: bool, given_up: bool = False) -> None:
        if self.nvrx is not None:
            self.nvrx.close(collective=collective)


def make_backend(
    mode: str, *, delay_s: float, nvrx: NvrxAsync | None, staging: NvrxStaging, write_threads: int = 1
) -> tuple[Backend, str]:
    """The backend for ``mode`` and a notice to print when it is a fallback (CPU: no NVRx async path)."""
    if mode == "sync":
        return Backend(delay_s), ""
    if nvrx is not None or nvrx_async_available():
        return Nvrx(delay_s, nvrx or NvrxAsync(staging, write_threads=write_threads)), ""
    notice = (
        "no CUDA: NVRx async DCP (FileSystemWriterAsync + AsyncCallsQueue) needs CUDA, "
        "using torch.distributed.checkpoint.async_save instead"
    )
    return TorchAsync(delay_s), notice


def join_dcp_threads(timeout_s: float = 30.0) -> None:
    """Join torch's finished async-save worker threads (it shuts its executor down with ``wait=False``);
    a worker still alive at interpreter exit can abort the process."""
    for t in threading.enumerate():
        if t.name.startswith("AsyncCheckpointExecutor") and t is not threading.current_thread():
            t.join(timeout_s)
