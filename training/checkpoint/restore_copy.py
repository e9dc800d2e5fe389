"""The restore's copies of a memory-tier snapshot into the live state, and the staging buffer a failed iteration hands
over.

Restore (:meth:`RestoreCopies.verify`, then :meth:`RestoreCopies.scatter`): the host buffer goes to the GPU and is
fingerprinted there, then spread over the live tensors device-to-device; without room on the GPU, the fingerprint is
taken on the CPU and the tensors are copied from host memory one by one. A page-locked host buffer (this process's own
slot) goes in one copy; a pageable one (a slot of an earlier process, after ft_launcher's restart) through two
page-locked bounce buffers that threads fill while the GPU reads the other (:func:`copy_from_pageable`): 8-9 GB/s
for the 1B model's 11.7 GB on an H100, where CUDA's own copy from pageable memory ran at 4-7.5 GB/s.

Across an in-process restart the save's GPU staging buffer (:mod:`training.checkpoint.snapshot_copy`) is the fastest
copy: a tier closed on the error path hands its copier over (:meth:`RestoreCopies.hand_over`), and when that staging
buffer holds the snapshot the restore wants (the same fingerprint, taken again on the GPU) the restore skips the
host-to-device copy (0.29 s for the 1B model's 11.7 GB on an H100). Any other restore, and the new tier's first
``prepare``, lets it go (:func:`let_go_handed_over`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from training.checkpoint import pinning
from training.checkpoint.fingerprint import digest, fingerprint, fingerprint_parts
from training.checkpoint.snapshot import Layout, Split, copy_out, view_of

#: Share of the GPU's memory left free at the step's peak when sizing the staging buffer (fragmentation, NCCL).
GPU_MARGIN = 0.06

#: Bytes of each of the two page-locked bounce buffers of a copy from pageable memory, and the threads filling one.
BOUNCE_BYTES = 256 << 20
BOUNCE_THREADS = 8

#: The copier of a tier closed on the error path, whose staging buffer may hold the snapshot the next restore loads.
_handed_over: RestoreCopies | None = None


def _take_handed_over() -> RestoreCopies | None:
    """The copier handed over by the failed iteration's tier, if any; it is no longer kept here."""
    global _handed_over
    copier, _handed_over = _handed_over, None
    return copier


def let_go_handed_over() -> None:
    """A restore is over: the failed iteration's staging buffer, if nothing took it, goes back to the allocator."""
    _take_handed_over()


class RestoreCopies:
    """The restore side of a memory tier's copier: what its staging buffer holds, the hand-over, verify, scatter."""

    def __init__(self) -> None:
        self.cuda = torch.cuda.is_available()
        self._staging: torch.Tensor | None = None  # the save's GPU staging buffer (snapshot_copy)
        self._restoring: torch.Tensor | None = None  # a verified snapshot on the GPU, for :meth:`scatter`
        #: The fingerprint of the snapshot the staging buffer holds whole (:meth:`holds`), None while one is copied.
        self.holding: str | None = None
        #: Where the last verified restore read its bytes: "gpu" (a failed iteration's staging buffer), "host" (one
        #: pinned copy to the GPU), "cpu" (no room on the GPU, or no CUDA).
        self.restored_from: str | None = None

    @property
    def staged(self) -> int:
        return 0 if self._staging is None else self._staging.numel()

    def holds(self, fingerprint: str, staged_whole: bool) -> None:
        """A snapshot with ``fingerprint`` is copied; when it was ``staged_whole`` (and fingerprinted on the GPU), the
        staging buffer holds it until the next save."""
        if staged_whole:
            self.holding = fingerprint

    def hand_over(self) -> None:
        """The tier closes on the error path: keep this copier, if it has a staging buffer, for the next restore in
        this process (see the module docstring). What the buffer holds is judged then: the snapshot in flight at the
        fault may claim it only after this (:meth:`holds`, on the tier's thread, which the restore waits for)."""
        global _handed_over
        _handed_over = self if self._staging is not None else None

    def verify(self, host: torch.Tensor, nbytes: int, expected: str | None) -> bool:
        """Whether ``host[:nbytes]`` has the fingerprint ``expected``. On CUDA the bytes are fingerprinted on the GPU
        and stay there for :meth:`scatter`: a failed iteration's staging buffer that holds them, else one copy from
        ``host`` (with the room; else the CPU fingerprints ``host``)."""
        self._restoring = None
        previous = _take_handed_over()
        if expected is None:
            return False
        if previous is not None and previous.holding == expected and previous.staged >= nbytes:
            gpu = previous._staging
            assert gpu is not None
            if digest(fingerprint_parts(gpu[:nbytes])) == expected:
                self._restoring, self.restored_from = gpu, "gpu"
                return True
            print("[checkpoint] the failed iteration's GPU copy of the snapshot changed: reading host memory")
        del previous  # its staging buffer goes back to the allocator before the room is judged
        if self.cuda and (self.staged >= nbytes or _free_for(nbytes)):
            gpu = self._staging if self.staged >= nbytes else torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            assert gpu is not None
            if host.is_pinned():
                pinning.copy(gpu[:nbytes], host[:nbytes], non_blocking=True)
            else:
                copy_from_pageable(gpu, host, nbytes)
            self._restoring, self.restored_from = gpu, "host"
            return digest(fingerprint_parts(gpu[:nbytes])) == expected
        self.restored_from = "cpu"
        return fingerprint(host[:nbytes]) == expected

    def scatter(self, host: torch.Tensor, layout: Layout, parts: Split) -> None:
        """Copy the verified snapshot into the live tensors of ``parts`` (from the GPU when :meth:`verify` left it
        there; a buffer allocated for that is given back)."""
        gpu, self._restoring = self._restoring, None
        if gpu is None:
            copy_out(host, layout, parts)
            return
        pairs = [(t, view_of(gpu, e)) for e, t in zip(layout.entries, parts.local, strict=True) if e.nbytes]
        with torch.no_grad():
            torch._foreach_copy_([t for t, _ in pairs], [s for _, s in pairs])
        if gpu.is_cuda:
            torch.cuda.current_stream().synchronize()


def copy_from_pageable(
    dst: torch.Tensor, src: torch.Tensor, nbytes: int, *, chunk: int = BOUNCE_BYTES, threads: int = BOUNCE_THREADS
) -> None:
    """``dst[:nbytes] = src[:nbytes]`` for a pageable ``src`` (uint8): ``threads`` threads copy each ``chunk`` into one
    of two page-locked buffers (faulting the source's pages in as they go), and the GPU reads it while they fill the
    other. Asynchronous on CUDA (on the current stream); a plain copy in chunks for a CPU ``dst``."""
    cuda = dst.is_cuda
    bufs = [torch.empty(min(chunk, nbytes), dtype=torch.uint8, pin_memory=cuda) for _ in range(2)]
    read: list[Any] = [None, None]  # the event after which the GPU has read each buffer
    with ThreadPoolExecutor(threads, thread_name_prefix="restore-bounce") as pool:
        for i, start in enumerate(range(0, nbytes, chunk)):
            n, buf = min(chunk, nbytes - start), bufs[i % 2]
            if read[i % 2] is not None:
                read[i % 2].synchronize()
            part = -(-n // threads)
            pieces = [(o, min(o + part, n)) for o in range(0, n, part)]
            list(pool.map(lambda p, b=buf, s=start: b[p[0] : p[1]].copy_(src[s + p[0] : s + p[1]]), pieces))
            dst[start : start + n].copy_(buf[:n], non_blocking=cuda)
            if cuda:
                read[i % 2] = torch.cuda.Event()
                read[i % 2].record()


def _free_for(nbytes: int) -> bool:
    """Whether the GPU has ``nbytes`` free right now (a restore, before the first step: used, then given back)."""
    free, _ = torch.cuda.mem_get_info()
    cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    return free + cached >= nbytes * (1 + GPU_MARGIN)
