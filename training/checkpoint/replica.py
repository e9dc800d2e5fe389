"""Peer replicas of the memory tier: where each rank's copy lives, which step every rank can get, and the transfers.

Placement (as NVRx's ``CliqueReplicationStrategy`` with a replication jump of one node): rank ``r`` holds a copy of
rank ``(r + ranks per node) mod world``'s snapshot, so the copy of every rank lives on the next node and a single node
loss leaves one copy of each snapshot. On one node there is no peer (the copy would sit in the same pod).

The search (as NVRx's ``BaseCheckpointManager.find_latest``): every rank lists the snapshots it holds, the lists are
gathered, and the newest step for which every rank's snapshot is held somewhere (with the current world size and
layout) wins. Unlike NVRx, the copies travel on a thread of their own after the snapshot, not on the training thread,
into buffers allocated once (:mod:`training.checkpoint.hostbuf`), and never through a forked process.

Transfers are gloo point-to-point on the memory tier's own group, in chunks of :data:`CHUNK` bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

#: Bytes per point-to-point message (gloo sends a tensor in one piece).
CHUNK = 256 << 20
#: Tiers from the nearest to the farthest; a restore's tier is the farthest any rank used.
TIERS = ("memory", "shm", "peer")


def peers(rank: int, world_size: int, per_node: int) -> tuple[int | None, int | None]:
    """(the rank that holds this rank's copy, the rank whose copy this rank holds); (None, None) on one node."""
    per_node = max(1, per_node)
    if world_size <= per_node or world_size % per_node:
        return None, None
    return (rank - per_node) % world_size, (rank + per_node) % world_size


@dataclass(frozen=True)
class Held:
    """One snapshot a rank holds, as listed for the search."""

    holder: int
    owner: int
    step: int
    world_size: int
    signature: str
    nbytes: int
    meta_len: int
    slot: int
    live: bool  # written or received by the holder's current process ("own memory")


def newest_common_step(held: list[Held], world_size: int, signatures: list[str] | None, at_least: int) -> int | None:
    """The newest step ``>= at_least`` whose snapshot of every rank is held by some rank, with this world size and
    each rank's current layout (any layout when ``signatures`` is None); None if there is none."""
    cover: dict[int, set[int]] = {}
    for h in held:
        fits = signatures is None or h.signature == signatures[h.owner]
        if h.world_size == world_size and h.owner < world_size and fits:
            cover.setdefault(h.step, set()).add(h.owner)
    steps = [s for s, owners in cover.items() if len(owners) == world_size and s >= at_least]
    return max(steps, default=None)


def plan(held: list[Held], step: int, world_size: int, signatures: list[str]) -> list[Held]:
    """For each rank (in order), the copy of its snapshot of ``step`` to load: its own if it holds one (in its
    process' memory first), else the lowest-ranked holder's."""
    chosen = []
    for owner in range(world_size):
        fits = [
            h
            for h in held
            if h.owner == owner and h.step == step and h.world_size == world_size and h.signature == signatures[owner]
        ]
        fits.sort(key=lambda h: (h.holder != owner, not h.live, h.holder, h.slot))
        chosen.append(fits[0])
    return chosen


def tier_of(copy: Held) -> str:
    if copy.holder != copy.owner:
        return "peer"
    return "memory" if copy.live else "shm"


def farthest(tiers: list[str]) -> str:
    return max(tiers, key=TIERS.index)


def _chunks(t: torch.Tensor) -> list[torch.Tensor]:
    return [t[i : i + CHUNK] for i in range(0, t.numel(), CHUNK)]


def transfer(pg: Any, sends: list[tuple[int, torch.Tensor]], recvs: list[tuple[int, torch.Tensor]]) -> None:
    """Post every send ``(dst, tensor)`` and receive ``(src, tensor)``, chunked, then wait for all. The k-th message
    between two ranks carries tag k on both sides, so any number of transfers between the same pair can overlap."""
    works = []
    tags: dict[tuple[str, int], int] = {}
    for kind, items in (("send", sends), ("recv", recvs)):
        for peer, t in items:
            for chunk in _chunks(t):
                tag = tags.get((kind, peer), 0)
                tags[(kind, peer)] = tag + 1
                op = dist.isend if kind == "send" else dist.irecv
                works.append(op(chunk, peer, group=pg, tag=tag))
    for w in works:
        w.wait()


def exchange(
    pg: Any,
    dst: int,
    src: int,
    mine: tuple[bytes, torch.Tensor] | None,
    receive: Callable[[int], torch.Tensor],
) -> tuple[bytes, torch.Tensor] | None:
    """Send this rank's snapshot (meta payload, data) to ``dst`` while receiving ``src``'s; returns what arrived.

    Three rounds, so that either side can have nothing to send or no room to receive without the other blocking:
    sizes (-1: nothing), readiness (the receiver's ``receive(nbytes)`` allocated its slot), then the bytes.
    """
    size_out = torch.tensor([len(mine[0]), mine[1].numel()] if mine else [-1, -1], dtype=torch.int64)
    size_in = torch.empty(2, dtype=torch.int64)
    transfer(pg, [(dst, size_out)], [(src, size_in)])
    meta_len, nbytes = (int(x) for x in size_in.tolist())
    buf: torch.Tensor | None = None
    if meta_len >= 0:
        try:
            buf = receive(nbytes)
        except OSError as exc:
            print(f"[checkpoint] no room for the peer copy of rank {src} ({nbytes} bytes): {exc}", flush=True)
    ready_out = torch.tensor([1 if buf is not None else 0], dtype=torch.int64)
    ready_in = torch.empty(1, dtype=torch.int64)
    transfer(pg, [(src, ready_out)], [(dst, ready_in)])
    sends = []
    if mine is not None and int(ready_in.item()) == 1:
        sends = [(dst, torch.frombuffer(bytearray(mine[0]), dtype=torch.uint8)), (dst, mine[1])]
    meta_in = torch.empty(max(meta_len, 0), dtype=torch.uint8)
    recvs = [(src, meta_in), (src, buf)] if buf is not None else []
    transfer(pg, sends, recvs)
    return (meta_in.numpy().tobytes(), buf) if buf is not None else None
