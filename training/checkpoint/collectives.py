"""The small collectives of the checkpoint group (a gloo group of its own; None in a one-process run)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from training.checkpoint.errors import CheckpointSkewError

#: Seconds between the checks of a wait at :func:`wait_for_ranks`, and between its keep-alive pings.
ARRIVAL_POLL_S, ARRIVAL_PING_S = 0.05, 0.5


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


def wait_for_ranks(pg: Any, *, what: str, rank: int, timeout_s: float, ping: Callable[[], None] | None = None) -> None:
    """Wait at a barrier on ``pg``, a group whose deadline (``timeout_s``) is long, until every rank has arrived,
    calling ``ping`` every :data:`ARRIVAL_PING_S` (the rank's watchdogs must see it alive). Called right after this
    rank's own bulk I/O (``what``: writing, hashing, reading), before a collective on the checkpoint group's short
    deadline: ranks that end their I/O seconds apart (a slower file system client, a bigger shard) meet here, not
    in that collective. Past the deadline: :class:`CheckpointSkewError`."""
    if pg is None:
        return
    failed, t0 = False, time.monotonic()
    try:
        work = dist.barrier(group=pg, async_op=True)
        next_ping = t0
        while not work.is_completed():
            if ping is not None and time.monotonic() >= next_ping:
                ping()
                next_ping += ARRIVAL_PING_S
            time.sleep(ARRIVAL_POLL_S)
        work.wait()
    except RuntimeError:  # gloo's deadline, or the connection of a rank that gave up first
        failed = True
    if failed:  # raised here, wrapping nothing: a peer error in its chain would make it a lost peer
        raise CheckpointSkewError(
            f"rank {rank} left the checkpoint barrier after its own {what} {time.monotonic() - t0:.1f} s in (deadline "
            f"{timeout_s:g} s) with not every rank arrived: the ranks' checkpoint I/O ends that far apart (a slower "
            "file system client, a bigger shard), or a rank is gone"
        )
