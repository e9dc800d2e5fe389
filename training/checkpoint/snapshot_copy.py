"""Copies between the live state and a memory-tier host buffer, at the hardware's floor.

Save, on CUDA (:meth:`SnapshotCopier.save`, called on the training thread; every copy runs on a side stream):

1. the first :attr:`SnapshotCopier.staged` bytes of the layout are copied device-to-device into a GPU staging
   buffer (HBM: 11 GB in a few milliseconds), the rest device-to-host straight from the live tensors;
2. the optimizer step waits for those reads on the GPU (:meth:`before_optimizer_step`: a stream wait, not a host
   wait), because it changes their source;
3. the staging buffer drains to the host buffer in one pinned copy (about 50 GB/s), and when it holds the whole
   snapshot its :mod:`fingerprint <training.checkpoint.fingerprint>` is taken on the GPU as well.

The staging buffer holds as much of the snapshot as the GPU has room for at the step's peak (:func:`staging_room`):
all of it for a 1B model on an 80 GB card, none where the model fills the card, when every byte goes device-to-host
from the live tensors and the optimizer step waits for the copy (it overlaps the next forward and backward).

The restore's copies, and the hand-over of the staging buffer across an in-process restart, are
:mod:`training.checkpoint.restore_copy`'s.

Without CUDA every copy is a plain memory copy on the calling thread, and the fingerprint is the CPU's (said once in
the tier's start-up line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from training.checkpoint import pinning
from training.checkpoint.fingerprint import digest, fingerprint, fingerprint_parts
from training.checkpoint.restore_copy import GPU_MARGIN, RestoreCopies, let_go_handed_over
from training.checkpoint.snapshot import ALIGN, Layout, Split, copy_in, view_of


def staging_room(nbytes: int) -> int:
    """Bytes of a staging buffer the GPU can hold without raising the step's peak past the card: at most ``nbytes``,
    a multiple of :data:`ALIGN`, 0 without CUDA. Measured after a step (the peak includes its activations)."""
    if not torch.cuda.is_available():
        return 0
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    others = max(0, total - free - reserved)  # other processes, the CUDA context, NCCL's buffers
    room = int(total * (1 - GPU_MARGIN)) - others - torch.cuda.max_memory_allocated()
    return max(0, min(nbytes, room)) // ALIGN * ALIGN


def allocator_retries() -> dict[str, int]:
    """On CUDA, ``{"cuda_alloc_retries": n}``: how often the caching allocator has had to free its cache and retry a
    ``cudaMalloc`` in this process (each a device synchronisation; the staging buffer narrows the room it has), for
    the snapshot's event; nothing without CUDA."""
    if not torch.cuda.is_available():
        return {}
    return {"cuda_alloc_retries": int(torch.cuda.memory_stats().get("num_alloc_retries", 0))}


@dataclass
class PendingCopy:
    """A save in flight: :meth:`wait` returns once the host buffer holds it."""

    done: Any  # a CUDA event, or None (CPU: already done)
    parts_host: torch.Tensor | None  # the GPU fingerprint's two words, copied to pinned host memory

    def wait(self) -> None:
        if self.done is not None:
            self.done.synchronize()

    def fingerprint(self, host: torch.Tensor, nbytes: int) -> str:
        """The snapshot's fingerprint: the GPU's, or taken now over the host buffer."""
        self.wait()
        if self.parts_host is not None:
            return digest((self.parts_host[0], self.parts_host[1]))
        return fingerprint(host[:nbytes])


class SnapshotCopier(RestoreCopies):
    """The copies of one memory tier (see the module docstring). ``prepare`` once the step's peak is known; the
    restore's copies are :class:`~training.checkpoint.restore_copy.RestoreCopies`'."""

    def __init__(self) -> None:
        super().__init__()
        self._stream = torch.cuda.Stream() if self.cuda else None
        self._reads_done: Any = None
        self._parts_host = torch.empty(2, dtype=torch.int64, pin_memory=True) if self.cuda else None

    def prepare(self, nbytes: int) -> str:
        """Size the staging buffer for snapshots of ``nbytes`` (once, after the first step); a line saying how
        snapshots are copied."""
        let_go_handed_over()  # in case no restore ran since the fault
        if not self.cuda:
            return "no CUDA: snapshots are copied on the training thread, fingerprinted on the CPU (CPU fallback)"
        self._staging = None
        room = staging_room(nbytes)
        self._staging = torch.zeros(room, dtype=torch.uint8, device="cuda") if room else None
        gib = 1 << 30
        if self.staged >= nbytes:
            return f"staged whole on the GPU ({nbytes / gib:.2f} GiB), drained to host memory on a side stream"
        return (
            f"{self.staged / gib:.2f} of {nbytes / gib:.2f} GiB staged on the GPU (no room for more at the step's "
            "peak); the rest is copied to host memory before the next optimizer step"
        )

    # ------------------------------------------------------------------ save
    def save(self, host: torch.Tensor, layout: Layout, parts: Split) -> PendingCopy:
        """Start copying ``parts`` into ``host`` (see the module docstring)."""
        self.holding = None  # the staging buffer is about to change
        if not self.cuda:
            copy_in(host, layout, parts)
            return PendingCopy(None, None)
        assert self._stream is not None
        pairs = [(e, t) for e, t in zip(layout.entries, parts.local, strict=True) if e.nbytes]
        staged = [(e, t) for e, t in pairs if e.offset + e.nbytes <= self.staged]
        direct = [(e, t) for e, t in pairs if e.offset + e.nbytes > self.staged]
        self._stream.wait_stream(torch.cuda.current_stream())
        whole = not direct
        with torch.cuda.stream(self._stream):
            if staged:
                assert self._staging is not None
                torch._foreach_copy_([view_of(self._staging, e) for e, _ in staged], [t.detach() for _, t in staged])
            for e, t in direct:
                pinning.copy(view_of(host, e), t.detach(), non_blocking=True)
            self._reads_done = torch.cuda.Event()
            self._reads_done.record(self._stream)
            if staged:
                end = max(e.offset + e.nbytes for e, _ in staged)
                end = -(-end // ALIGN) * ALIGN if whole else end
                assert self._staging is not None
                pinning.copy(host[:end], self._staging[:end], non_blocking=True)
            parts_host = None
            if whole and self._parts_host is not None and self._staging is not None:
                total, weighted = fingerprint_parts(self._staging[: layout.nbytes])
                self._parts_host.copy_(torch.stack([total, weighted]), non_blocking=True)
                parts_host = self._parts_host
            done = torch.cuda.Event()
            done.record(self._stream)
        return PendingCopy(done, parts_host)

    def before_optimizer_step(self) -> None:
        """The optimizer step (on the current stream) waits on the GPU until the snapshot's reads of the live state
        are done; the host does not wait."""
        if self._reads_done is not None:
            torch.cuda.current_stream().wait_event(self._reads_done)
            self._reads_done = None
