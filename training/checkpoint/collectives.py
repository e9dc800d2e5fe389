"""The small collectives of the checkpoint group (a gloo group of its own; None in a one-process run)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def all_ok(pg: Any, ok: bool) -> bool:
    """True iff ``ok`` on every rank."""
    if pg is None:
        return ok
    t = torch.tensor([0 if ok else 1], dtype=torch.int64)
    dist.all_reduce(t, group=pg)
    return int(t.item()) == 0


def all_sum(pg: Any, values: list[int | bool]) -> list[int]:
    """The element-wise sum of ``values`` over every rank."""
    t = torch.tensor([int(v) for v in values], dtype=torch.int64)
    if pg is not None:
        dist.all_reduce(t, group=pg)
    return [int(x) for x in t.tolist()]


def broadcast(pg: Any, obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if pg is None:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=pg)
    return box[0]


def all_gather(pg: Any, obj: Any, world_size: int) -> list[Any]:
    """Every rank's ``obj``, in rank order."""
    if pg is None:
        return [obj]
    out: list[Any] = [None] * world_size
    dist.all_gather_object(out, obj, group=pg)
    return out
