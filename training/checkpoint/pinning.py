"""Page-locking the memory tier's host slots while training goes on, and the copies such a slot allows.

``cudaHostRegister`` holds the CUDA driver's lock (and the process' memory lock) while it page-locks, and the
training thread's kernel launches wait for it meanwhile. Two things keep that wait short:

- the page tables are filled first (``MADV_POPULATE_WRITE``) by :data:`POPULATE_THREADS` threads in chunks of
  :data:`POPULATE_CHUNK`, each chunk releasing the locks: a register of a mapping whose page tables are empty faults
  every page in under the locks (5.2 s for 2 x 11 GiB on an H100 host, launches stalled up to 2.8 s at a time,
  ``python -m benchmarks.host_pinning``);
- the mapping is then registered in pieces of :data:`PIN_PIECE` with :data:`PIN_GAP_S` between them, so each holds
  the lock for milliseconds and the launches go in between. Measured with ``python -m benchmarks.host_pinning --gib
  11 --slots 2`` on an H100 host (a main loop of 2.2 ms steps): one register per slot stalled a step for up to
  1.02 s, pieces of 256 MiB 10 ms apart for at most 0.030 s (the loop lost about as much time in all either way).

CUDA refuses a copy that spans two registrations (``cudaErrorInvalidValue``), so every copy to or from a slot goes
through :func:`copy`, which cuts it at the pieces' borders (a few dozen copies for 11 GB, each at full speed).
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

#: ``madvise`` advice filling a mapping's page tables for writing (linux/mman.h; Linux 5.14 and later).
MADV_POPULATE_WRITE = 23
#: Bytes one ``madvise`` call fills: the memory locks are free between chunks.
POPULATE_CHUNK = 64 << 20
#: Threads that fill the page tables.
POPULATE_THREADS = 8
#: Bytes one ``cudaHostRegister`` page-locks (a multiple of the page size).
PIN_PIECE = 256 << 20
#: Seconds between two registers (the training thread takes the driver's lock meanwhile).
PIN_GAP_S = 0.01
_LIBC = ctypes.CDLL(None, use_errno=True)
_NOTICE: list[str] = []
_LOCK = threading.Lock()
#: Base address -> length of every mapping page-locked in pieces (by :func:`pin`).
_PIECES: dict[int, int] = {}


@dataclass
class PinTimes:
    """Where one :func:`pin` spent its time."""

    populate_s: float = 0.0
    register_s: float = 0.0
    pieces: int = 0


def notice() -> str:
    """How page-locking went in this process, beyond the plain case ("" when it did)."""
    return "".join(f"; {n}" for n in _NOTICE)


def _madvise(addr: int, length: int) -> int:
    """``madvise(MADV_POPULATE_WRITE)``: 0, or the errno."""
    rc = _LIBC.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(length), ctypes.c_int(MADV_POPULATE_WRITE))
    return 0 if rc == 0 else ctypes.get_errno()


def populate(t: torch.Tensor) -> bool:
    """Fill the page tables of the mapping under ``t`` (page-aligned) in chunks on :data:`POPULATE_THREADS`
    threads. False, with a notice, where the kernel lacks ``MADV_POPULATE_WRITE`` (the register then faults the
    pages in itself, stalling the training thread meanwhile). Raises OSError on any other failure."""
    n = t.numel()
    with ThreadPoolExecutor(POPULATE_THREADS, thread_name_prefix="memtier-populate") as pool:
        errs = set(
            pool.map(lambda o: _madvise(t.data_ptr() + o, min(POPULATE_CHUNK, n - o)), range(0, n, POPULATE_CHUNK))
        )
    errs.discard(0)
    if errs == {errno.EINVAL}:
        note = (
            "MADV_POPULATE_WRITE refused (EINVAL: Linux < 5.14): the page-locking faults the pages in (stalls the loop)"
        )
        if note not in _NOTICE:
            _NOTICE.append(note)
        return False
    if errs:
        raise OSError(min(errs), f"madvise(MADV_POPULATE_WRITE) of {n} bytes failed: {os.strerror(min(errs))}")
    return True


def register(addr: int, length: int) -> None:
    """One ``cudaHostRegister`` of ``length`` bytes at ``addr``; OSError if CUDA refuses it."""
    err = torch.cuda.cudart().cudaHostRegister(addr, length, 0)
    if int(err) != 0:
        raise OSError(f"cudaHostRegister of {length} bytes failed: {err}")


def pin(t: torch.Tensor) -> PinTimes:
    """Page-lock the mapping under the uint8 tensor ``t`` (see the module docstring). Raises OSError (then nothing of
    it stays registered)."""
    times = PinTimes()
    if not torch.cuda.is_available() or not t.numel():
        return times
    t0 = time.perf_counter()
    populate(t)
    t1 = time.perf_counter()
    base, n = t.data_ptr(), t.numel()
    done = 0
    try:
        for offset in range(0, n, PIN_PIECE):
            if offset:
                time.sleep(PIN_GAP_S)
            register(base + offset, min(PIN_PIECE, n - offset))
            done = offset + PIN_PIECE
    except OSError:
        for offset in range(0, min(done, n), PIN_PIECE):
            torch.cuda.cudart().cudaHostUnregister(base + offset)
        raise
    with _LOCK:
        _PIECES[base] = n
    times.populate_s, times.register_s = t1 - t0, time.perf_counter() - t1
    times.pieces = -(-n // PIN_PIECE)
    return times


def cuts(t: torch.Tensor) -> list[int]:
    """The byte offsets inside ``t`` where one registration of a pinned mapping ends and the next begins."""
    start, n = t.data_ptr(), t.numel() * t.element_size()
    with _LOCK:
        pinned = list(_PIECES.items())
    for base, length in pinned:
        if base <= start < base + length:
            first = base + ((start - base) // PIN_PIECE + 1) * PIN_PIECE
            return [c - start for c in range(first, min(start + n, base + length), PIN_PIECE)]
    return []


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).view(torch.uint8)


def copy(dst: torch.Tensor, src: torch.Tensor, *, non_blocking: bool = False) -> None:
    """``dst.copy_(src)`` for tensors of the same dtype and shape, either of which may lie in a mapping page-locked in
    pieces: cut so that no copy spans two of its registrations (on CUDA: asynchronous where ``non_blocking``)."""
    at = sorted(set(cuts(dst)) | set(cuts(src)))
    if not at:
        dst.copy_(src, non_blocking=non_blocking)
        return
    if dst.dtype != src.dtype or dst.shape != src.shape:
        raise ValueError(
            f"a cut copy needs tensors alike, got {dst.dtype}{tuple(dst.shape)} <- {src.dtype}{tuple(src.shape)}"
        )
    if not dst.is_contiguous():  # a slot's views are contiguous: this is a live tensor, filled through a contiguous one
        whole = torch.empty_like(dst, memory_format=torch.contiguous_format)
        copy(whole, src, non_blocking=non_blocking)
        dst.copy_(whole, non_blocking=non_blocking)
        return
    d, s = _as_bytes(dst), _as_bytes(src.contiguous())
    bounds = [0, *at, d.numel()]
    for a, b in itertools.pairwise(bounds):
        d[a:b].copy_(s[a:b], non_blocking=non_blocking)
