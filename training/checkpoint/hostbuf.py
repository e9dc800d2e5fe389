"""Host buffers of the memory tier: files in ``/dev/shm`` mapped once per process, page-locked when CUDA is there.

One slot is one snapshot of one rank's state ("the owner"): ``owner<r>.slot<k>.bin`` (the tensor bytes, in the
layout of :mod:`training.checkpoint.snapshot`) and ``owner<r>.slot<k>.meta`` (sha256 of the payload, then the pickled
payload: step, owner, world size, layout, the non-tensor state, the data's fingerprint and the run's id). A slot is
valid only while its meta exists and its digest and the data's fingerprint match, so a snapshot torn by a crash is
never loaded: a writer removes the meta first and writes it last.

Why files in ``/dev/shm``: the same bytes are "own memory" after an in-process restart (the process keeps its
mapping: no allocation, no copy), survive an ft_launcher restart of the workers on the same node (a new process
maps them again) and die with the pod (on Kubernetes ``/dev/shm`` is the pod's ``emptyDir: Memory`` volume). The
mapping of a path is made once per process (:func:`buffer`) and kept for the process' life, so every snapshot after
the first reuses it; the first mapping reserves the pages (``posix_fallocate``), so a full ``/dev/shm`` is an
``ENOSPC`` at allocation, not a SIGBUS in the middle of a copy.

Page-locking (:mod:`training.checkpoint.pinning`) runs while training goes on without stalling the training
thread: the page tables are filled first, then registered in pieces, and every copy to or from a slot goes through
:func:`training.checkpoint.pinning.copy`, which keeps each copy within one piece.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import pickle
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import torch

from training.checkpoint import pinning

_PROCESS_ID = uuid.uuid4().hex


def process_id() -> str:
    """Identifies this process in the metas it writes (a slot written by this process is "own memory"). A fork (a
    worker forked by :mod:`training.launch.prefork`'s template) gets a new one: it holds none of its parent's
    buffers."""
    return _PROCESS_ID


def _new_process_id() -> None:
    global _PROCESS_ID
    _PROCESS_ID = uuid.uuid4().hex


os.register_at_fork(after_in_child=_new_process_id)
#: path -> (mmap, uint8 tensor over all of it, its bytes): the mappings of this process, made once and never closed.
_MAPPED: dict[Path, tuple[mmap.mmap, torch.Tensor, int]] = {}
#: The mapped paths that are page-locked.
_PINNED: set[Path] = set()
#: Held while a mapping is made or page-locked.
_LOCK = threading.RLock()
_DIGEST_LEN = 32
#: Seconds this process spent readying host buffers, by part (:func:`take_times`).
_TIMES: dict[str, float] = {}


def pinning_notice() -> str:
    """How the buffers are held: page-locked (CUDA) or plain shared memory (the CPU fallback, said so)."""
    if torch.cuda.is_available():
        return (
            f"host buffers page-locked (cudaHostRegister in pieces of {pinning.PIN_PIECE >> 20} MiB){pinning.notice()}"
        )
    return "no CUDA: host buffers are plain shared memory, not page-locked (CPU fallback)"


def take_times() -> dict[str, float]:
    """Seconds spent readying host buffers since the last call, by part: ``reserve`` (allocating the file's pages),
    ``populate`` (page tables), ``register`` (page-locking), and ``pieces`` registered."""
    times = dict(_TIMES)
    _TIMES.clear()
    return times


def _add(**parts: float) -> None:
    for k, v in parts.items():
        _TIMES[k] = _TIMES.get(k, 0.0) + v


def buffer(path: Path, nbytes: int, *, pin: bool = True) -> torch.Tensor:
    """A uint8 tensor of ``nbytes`` bytes over the file ``path``, mapped once per process, and page-locked on CUDA
    unless ``pin`` is False (a restore reads a snapshot once, faster than page-locking 11 GB takes: :func:`pin`
    can follow later).

    A mapping or an existing file at least ``nbytes`` long is used as it is (its bytes are kept: the snapshot of an
    earlier process; a slot readied at start-up for the largest snapshot the state can take,
    :mod:`training.checkpoint.host_slots`), the tensor being its first ``nbytes`` bytes; a shorter one is replaced.
    Raises OSError (``ENOSPC`` when ``/dev/shm`` is full). Thread-safe: a mapping ready for the call is returned at
    once; making or page-locking one is done by one thread at a time (a failed iteration's readying may still run
    when the next begins).
    """
    mapped = _MAPPED.get(path)
    if mapped is not None and mapped[2] >= nbytes and (path in _PINNED or not pin) and path.exists():
        return mapped[1][:nbytes]
    with _LOCK:
        return _map(path, nbytes, pin=pin)


def _map(path: Path, nbytes: int, *, pin: bool) -> torch.Tensor:
    mapped = _MAPPED.get(path)
    if mapped is not None and mapped[2] >= nbytes and path.exists():
        if pin:
            pin_buffer(path)
        return mapped[1][:nbytes]
    if mapped is not None:  # too short: a new file; the old mapping stays valid for whoever holds it
        _MAPPED.pop(path)
        _PINNED.discard(path)
        path.unlink(missing_ok=True)
    size = max(nbytes, 1)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size < size:
            os.ftruncate(fd, 0)
            os.ftruncate(fd, size)
        size = os.fstat(fd).st_size
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError:
            if size == max(nbytes, 1):
                raise
            size = max(nbytes, 1)  # a longer file left unreserved (a failed start-up readying): as long as needed
            os.ftruncate(fd, size)
            os.posix_fallocate(fd, 0, size)
        mm = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    _add(reserve=time.perf_counter() - t0)
    whole = torch.frombuffer(mm, dtype=torch.uint8)
    _MAPPED[path] = (mm, whole, size)
    if pin:
        pin_buffer(path)
    return whole[:nbytes]


def pin_buffer(path: Path) -> None:
    """Page-lock the mapping of ``path`` (made by :func:`buffer`) on CUDA, once."""
    if path in _PINNED:
        return
    with _LOCK:
        if path not in _PINNED and path in _MAPPED:
            times = pinning.pin(_MAPPED[path][1])
            _add(populate=times.populate_s, register=times.register_s, pieces=times.pieces)
            _PINNED.add(path)


class Slot:
    """One snapshot slot: ``<name>.bin`` (data) and ``<name>.meta`` in ``directory``."""

    def __init__(self, directory: Path, owner: int, index: int) -> None:
        self.owner = owner
        self.index = index
        self.data_path = directory / f"owner{owner}.slot{index}.bin"
        self.meta_path = directory / f"owner{owner}.slot{index}.meta"

    def __repr__(self) -> str:
        return f"Slot({self.data_path.name})"

    def data(self, nbytes: int, *, pin: bool = True) -> torch.Tensor:
        return buffer(self.data_path, nbytes, pin=pin)

    def invalidate(self) -> None:
        """Remove the meta first: from here on the slot holds no snapshot, whatever its data file holds."""
        self.meta_path.unlink(missing_ok=True)

    def read_meta(self) -> dict[str, Any] | None:
        """The slot's meta if it exists and its digest matches, else None."""
        return decode_meta(self.meta_path.read_bytes()) if self.meta_path.is_file() else None

    def write_meta(self, payload: bytes) -> None:
        part = self.meta_path.with_name(self.meta_path.name + ".part")
        part.write_bytes(payload)
        os.replace(part, self.meta_path)

    def remove(self) -> None:
        self.invalidate()
        self.data_path.unlink(missing_ok=True)
        _MAPPED.pop(self.data_path, None)
        _PINNED.discard(self.data_path)


def encode_meta(meta: dict[str, Any]) -> bytes:
    body = pickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL)
    return hashlib.sha256(body).digest() + body


def decode_meta(blob: bytes) -> dict[str, Any] | None:
    """The meta in ``blob``, or None when its digest does not match (a torn or damaged meta)."""
    digest, body = blob[:_DIGEST_LEN], blob[_DIGEST_LEN:]
    if len(blob) <= _DIGEST_LEN or hashlib.sha256(body).digest() != digest:
        return None
    meta = pickle.loads(body)
    return meta if isinstance(meta, dict) and "step" in meta else None


def slots(directory: Path) -> list[Slot]:
    """Every slot with a meta file in ``directory``."""
    found = []
    for meta in sorted(directory.glob("owner*.slot*.meta")) if directory.is_dir() else []:
        owner, index = meta.name[len("owner") : -len(".meta")].split(".slot")
        found.append(Slot(directory, int(owner), int(index)))
    return found
