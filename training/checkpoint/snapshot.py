"""A state dict as flat bytes: the layout of a memory-tier snapshot (the cached save plan of the host buffer).

:func:`split` walks a state dict (``{"app": AppState.state_dict()}``) in insertion order and takes out every tensor
(a DTensor's local shard); what remains (sampler, step, pickled RNG and extra state, optimizer hyper-parameters) is
the skeleton, pickled into the slot's meta. :class:`Layout` places the tensors back to back, 64-byte aligned, in
one buffer; it depends only on the keys, dtypes and shapes, so it is computed once and reused by every snapshot
(:attr:`Layout.signature` tells whether a snapshot fits the current model).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed.tensor import DTensor

from training.checkpoint import pinning

ALIGN = 64


class TensorRef:
    """Where the skeleton had tensor number ``index``."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __reduce__(self) -> tuple[Any, ...]:
        return (TensorRef, (self.index,))


@dataclass(frozen=True)
class Entry:
    key: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclass(frozen=True)
class Layout:
    entries: tuple[Entry, ...]
    nbytes: int

    @property
    def signature(self) -> str:
        """sha256 of the keys, dtypes and shapes (not the offsets, which follow from them)."""
        text = "\n".join(f"{e.key}|{e.dtype}|{e.shape}" for e in self.entries)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Split:
    """A state dict taken apart: the live tensor objects, their local data, and the rest."""

    objects: list[Any]  # the state dict's tensors (DTensors or plain), in walk order
    local: list[torch.Tensor]  # their local data (a DTensor's shard)
    keys: list[str]
    skeleton: Any


def split(state_dict: Any) -> Split:
    out = Split([], [], [], None)

    def walk(value: Any, key: str) -> Any:
        if isinstance(value, torch.Tensor):
            out.objects.append(value)
            out.local.append(value.to_local() if isinstance(value, DTensor) else value)
            out.keys.append(key)
            return TensorRef(len(out.objects) - 1)
        if isinstance(value, dict):
            return {k: walk(v, f"{key}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{key}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return tuple(walk(v, f"{key}[{i}]") for i, v in enumerate(value))
        return value

    out.skeleton = walk(state_dict, "")
    return out


def layout_of(parts: Split) -> Layout:
    entries, offset = [], 0
    for key, t in zip(parts.keys, parts.local, strict=True):
        nbytes = t.numel() * t.element_size()
        entries.append(Entry(key, str(t.dtype).removeprefix("torch."), tuple(t.shape), offset, nbytes))
        offset += -(-nbytes // ALIGN) * ALIGN
    return Layout(tuple(entries), offset)


def adamw_snapshot_bytes(shapes: Iterable[Sequence[int]], world: int, *, element_size: int = 4) -> int:
    """The bytes of a snapshot (:func:`layout_of`) of a model whose parameters, of these ``shapes`` and
    ``element_size``, FSDP2 shards on dim 0 over ``world`` ranks, and of its AdamW state: the weight, two moments of
    its dtype and a float32 step per parameter, each entry aligned. Known before the model or its optimizer state
    exist: exact where ``world`` divides every dim 0, otherwise an upper bound (a rank's shard has at most
    ``ceil(dim0 / world)`` rows)."""
    total = 0
    for shape in shapes:
        rows = -(-shape[0] // world) if shape else 1
        nbytes = rows * (math.prod(shape[1:]) if shape else 1) * element_size
        total += 3 * (-(-nbytes // ALIGN) * ALIGN) + ALIGN  # weight, exp_avg, exp_avg_sq; step (4 bytes, aligned)
    return total


def view_of(buf: torch.Tensor, e: Entry) -> torch.Tensor:
    """Entry ``e``'s bytes of ``buf`` as a tensor of its dtype and shape."""
    return buf[e.offset : e.offset + e.nbytes].view(getattr(torch, e.dtype)).view(e.shape)


def copy_in(buf: torch.Tensor, layout: Layout, parts: Split, *, non_blocking: bool = False) -> None:
    """Copy the tensors of ``parts`` into ``buf`` (on CUDA: asynchronously on the current stream)."""
    for e, t in zip(layout.entries, parts.local, strict=True):
        if e.nbytes:
            pinning.copy(view_of(buf, e), t.detach(), non_blocking=non_blocking)


def copy_out(buf: torch.Tensor, layout: Layout, parts: Split) -> None:
    """Copy the snapshot in ``buf`` into the live tensors of ``parts`` (same layout)."""
    for e, t in zip(layout.entries, parts.local, strict=True):
        if e.nbytes:
            with torch.no_grad():
                pinning.copy(t, view_of(buf, e))


def rebuild(skeleton: Any, objects: list[Any]) -> Any:
    """The skeleton with each :class:`TensorRef` replaced by the live tensor object of that index."""
    if isinstance(skeleton, TensorRef):
        return objects[skeleton.index]
    if isinstance(skeleton, dict):
        return {k: rebuild(v, objects) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [rebuild(v, objects) for v in skeleton]
    if isinstance(skeleton, tuple):
        return tuple(rebuild(v, objects) for v in skeleton)
    return skeleton
