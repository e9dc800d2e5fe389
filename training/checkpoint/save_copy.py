"""The GPU copy an NVRx save is handed from, so that the loop does not wait for the writer's device-to-host copy.

NVRx's writer process copies a save's GPU tensors to host memory (its ``preload``) while the trainer waits for it
(``preload_q.join()``: the live tensors change at the next optimizer step): 0.31-0.33 s for each save of the 1B
model (11.7 GB) on an H100, most of an async save's stall once its plan is cached. Where the GPU has room,
``checkpoint.nvrx_staging: cuda-copy`` first copies the save's GPU tensors device-to-device into a buffer kept for
the next saves (:class:`SaveCopy`; HBM copies 11.7 GB in milliseconds) and hands the writer views of it. The writer
then runs its preload inside its write (:class:`PreloadThenWrite`), and the trainer waits only for its own copy.

Nothing writes the buffer while a writer may still read it: a save starts once the previous one is finalized (at
most one in flight), and a reused writer finishes the iteration before's requests before the next save is planned
(:meth:`~training.checkpoint.nvrx_async.NvrxAsync.schedule`). The buffer is kept by the process (:data:`_KEPT`), so
an in-process restart does not allocate a second one while the first may still be mapped by the writer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from training.checkpoint.snapshot import Layout, Split, layout_of, rebuild, split, view_of
from training.checkpoint.snapshot_copy import staging_room
from training.checkpoint.storage import human_bytes


def on_device(t: torch.Tensor) -> bool:
    """Whether a save copies ``t`` on the GPU (a CPU tensor goes to the writer as it is; NVRx clones it)."""
    return t.device.type != "cpu"


class SaveCopy:
    """A buffer holding a copy of a save's device tensors, and the state dict made of views of it (see the module
    docstring). ``room(nbytes)``: the bytes the device has room for (default :func:`staging_room`); ``copied``: which
    tensors are copied (default :func:`on_device`)."""

    def __init__(
        self, *, room: Callable[[int], int] = staging_room, copied: Callable[[torch.Tensor], bool] = on_device
    ) -> None:
        self.room, self.copied = room, copied
        self.buffer: torch.Tensor | None = None
        self._layout: Layout | None = None
        self._views: list[torch.Tensor] = []  # of :attr:`buffer`, one per entry of the layout
        #: The copies as the state dict holds them (DTensors around views of :attr:`buffer`), by tensor index.
        self._objects: dict[int, Any] = {}
        #: Why the last :meth:`stage` returned None (no room), for the line the caller prints once.
        self.refused: str | None = None
        self._refusal_said = False

    def stage(self, state_dict: dict[str, Any]) -> dict[str, Any] | None:
        """``state_dict`` with each copied tensor replaced by a copy in :attr:`buffer`, made now on the current
        stream and complete when this returns; None (with :attr:`refused` set) when the device has no room for it."""
        parts = split(state_dict)
        chosen = [i for i, t in enumerate(parts.local) if self.copied(t)]
        layout = layout_of(Split([], [parts.local[i] for i in chosen], [parts.keys[i] for i in chosen], None))
        fits = self._layout is not None and self._layout.signature == layout.signature
        if not fits and not self._allocate(layout, parts.local[chosen[0]].device if chosen else None):
            return None
        if self.buffer is None:  # nothing to copy
            return state_dict
        views = dict(zip(chosen, self._views, strict=True))
        pairs = [(views[i], parts.local[i].detach()) for i, e in zip(chosen, layout.entries, strict=True) if e.nbytes]
        torch._foreach_copy_([v for v, _ in pairs], [t for _, t in pairs])
        if self.buffer.is_cuda:
            # The writer may find the buffer in its cache of opened CUDA IPC handles, and then reads it without
            # waiting for an event of this stream: it must hold the copy before the hand-over.
            torch.cuda.current_stream().synchronize()
        for i in chosen:
            if not _same_frame(self._objects.get(i), parts.objects[i]):
                self._objects[i] = _as_held(parts.objects[i], views[i])
        return rebuild(parts.skeleton, [self._objects.get(i, obj) for i, obj in enumerate(parts.objects)])

    def handed(self, state_dict: dict[str, Any]) -> dict[str, Any] | None:
        """:meth:`stage`, saying once when the GPU has no room (the loop then waits for the writer's device-to-host
        copy at each save, as with ``cuda-ipc``)."""
        staged = self.stage(state_dict)
        if staged is None and not self._refusal_said:
            self._refusal_said = True
            print(
                f"[checkpoint] rank {_rank()}: cuda-copy staging: {self.refused}; the loop waits for the writer's "
                "device-to-host copy at each save (as with cuda-ipc)",
                flush=True,
            )
        return staged

    def _allocate(self, layout: Layout, device: torch.device | None) -> bool:
        self.buffer, self._layout, self._views, self._objects = None, None, [], {}
        if device is None or layout.nbytes == 0:
            self._layout = layout
            return True
        room = self.room(layout.nbytes)
        if room < layout.nbytes:
            self.refused = (
                f"no room on the GPU for a copy of the save ({human_bytes(layout.nbytes)}, room for "
                f"{human_bytes(room)} at the step's peak)"
            )
            return False
        self.buffer = torch.empty(layout.nbytes, dtype=torch.uint8, device=device)
        self._views = [view_of(self.buffer, e) for e in layout.entries]
        if _rank() == 0:
            print(
                f"[checkpoint] cuda-copy staging: each save is copied on the {device.type.upper()} first "
                f"({human_bytes(layout.nbytes)}, kept for the next saves); the writer copies that to host after the "
                "hand-over",
                flush=True,
            )
        self._layout, self.refused = layout, None
        return True


def _rank() -> int:
    """This process' rank in the default group (0 without one)."""
    return dist.get_rank() if dist.is_initialized() else 0


def _as_held(original: Any, view: torch.Tensor) -> Any:
    """``view`` as the state dict held ``original``: a DTensor of the same mesh, placements, shape and stride."""
    if isinstance(original, DTensor):
        return DTensor.from_local(
            view, original.device_mesh, original.placements, run_check=False, shape=original.shape,
            stride=original.stride(),
        )  # fmt: skip
    return view


def _same_frame(held: Any, original: Any) -> bool:
    """Whether ``held`` (a copy made by :func:`_as_held` for an earlier save) still stands for ``original``: the
    same mesh object and placements (an in-process restart makes a new mesh), or both plain tensors."""
    if isinstance(original, DTensor):
        return (
            isinstance(held, DTensor)
            and held.device_mesh is original.device_mesh
            and held.placements == original.placements
        )
    return held is not None and not isinstance(held, DTensor)


class PreloadThenWrite:
    """An NVRx request's function that runs its preload (the device-to-host copy) and then its write, both in the
    writer process: a request without a ``preload_fn`` of its own is handed over without waiting for the copy.
    Picklable when ``preload`` and ``write`` are. The write's second argument is the preload's result, as NVRx's
    worker passes it."""

    def __init__(self, preload: Callable[[], Any], write: Callable[..., Any]) -> None:
        self.preload, self.write = preload, write

    def __call__(self, *args: Any) -> Any:
        args_list = list(args)
        args_list[1] = self.preload()
        return self.write(*args_list)


#: The process' save copy, kept across in-process restarts (see the module docstring).
_KEPT: list[SaveCopy] = []


def kept_save_copy() -> SaveCopy:
    """This process' :class:`SaveCopy` (made on the first call)."""
    if not _KEPT:
        _KEPT.append(SaveCopy())
    return _KEPT[0]
