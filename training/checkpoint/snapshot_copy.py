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

Restore (:meth:`verify`, then :meth:`scatter`): the host buffer goes to the GPU in one pinned copy and is
fingerprinted there, then spread over the live tensors device-to-device; without room on the GPU, the fingerprint is
taken on the CPU and the tensors are copied from host memory one by one.

Across an in-process restart the staging buffer itself is the fastest copy: a tier closed on the error path hands its
copier over (:meth:`SnapshotCopier.hand_over`), and when its staging buffer holds the snapshot the restore wants (the
same fingerprint, taken again on the GPU) the restore skips the host-to-device copy (0.29 s for the 1B model's 11.7
GB on an H100). Any other restore, and the new tier's first :meth:`~SnapshotCopier.prepare`, lets it go.

Without CUDA every copy is a plain memory copy on the calling thread, and the fingerprint is the CPU's (said once in
the tier's start-up line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from training.checkpoint.fingerprint import digest, fingerprint, fingerprint_parts
from training.checkpoint.snapshot import ALIGN, Layout, Split, copy_in, copy_out, view_of

#: Share of the GPU's memory left free at the step's peak when sizing the staging buffer (fragmentation, NCCL).
GPU_MARGIN = 0.06


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


#: The copier of a tier closed on the error path, whose staging buffer may hold the snapshot the next restore loads.
_handed_over: SnapshotCopier | None = None


def _take_handed_over() -> SnapshotCopier | None:
    """The copier handed over by the failed iteration's tier, if any; it is no longer kept here."""
    global _handed_over
    copier, _handed_over = _handed_over, None
    return copier


def let_go_handed_over() -> None:
    """A restore is over: the failed iteration's staging buffer, if nothing took it, goes back to the allocator."""
    _take_handed_over()


class SnapshotCopier:
    """The copies of one memory tier (see the module docstring). ``prepare`` once the step's peak is known."""

    def __init__(self) -> None:
        self.cuda = torch.cuda.is_available()
        self._stream = torch.cuda.Stream() if self.cuda else None
        self._staging: torch.Tensor | None = None
        self._reads_done: Any = None
        self._parts_host = torch.empty(2, dtype=torch.int64, pin_memory=True) if self.cuda else None
        self._restoring: torch.Tensor | None = None  # a verified snapshot on the GPU, for :meth:`scatter`
        #: The fingerprint of the snapshot the staging buffer holds whole (:meth:`holds`), None while one is copied.
        self.holding: str | None = None
        #: Where the last verified restore read its bytes: "gpu" (a failed iteration's staging buffer), "host" (one
        #: pinned copy to the GPU), "cpu" (no room on the GPU, or no CUDA).
        self.restored_from: str | None = None

    @property
    def staged(self) -> int:
        return 0 if self._staging is None else self._staging.numel()

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
                view_of(host, e).copy_(t.detach(), non_blocking=True)
            self._reads_done = torch.cuda.Event()
            self._reads_done.record(self._stream)
            if staged:
                end = max(e.offset + e.nbytes for e, _ in staged)
                end = -(-end // ALIGN) * ALIGN if whole else end
                assert self._staging is not None
                host[:end].copy_(self._staging[:end], non_blocking=True)
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

    def holds(self, fingerprint: str, pending: PendingCopy) -> None:
        """The snapshot of ``pending`` is copied and has ``fingerprint``: when it was staged whole, the staging
        buffer holds it (until the next :meth:`save`)."""
        if pending.parts_host is not None:  # staged whole and fingerprinted on the GPU
            self.holding = fingerprint

    def hand_over(self) -> None:
        """The tier closes on the error path: keep this copier for the next restore in this process (see the module
        docstring). Only a staging buffer that holds a whole snapshot is kept."""
        global _handed_over
        _handed_over = self if self._staging is not None and self.holding is not None else None

    # ------------------------------------------------------------------ restore
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
            gpu[:nbytes].copy_(host[:nbytes], non_blocking=True)
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


def _free_for(nbytes: int) -> bool:
    """Whether the GPU has ``nbytes`` free right now (a restore, before the first step: used, then given back)."""
    free, _ = torch.cuda.mem_get_info()
    cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    return free + cached >= nbytes * (1 + GPU_MARGIN)
