"""The memory tier's restore (collective, before storage): every rank lists the snapshots it holds, the newest step
every rank can get wins (when it is not older than the newest committed storage checkpoint), copies travel from their
holders, each rank verifies the fingerprint of what it loads (on the GPU where there is room:
:meth:`SnapshotCopier.verify`), and the ``restore`` event names the farthest tier any rank used.

A restore reads each snapshot once: its host buffer is mapped without page-locking it (page-locking 11 GB takes
seconds, longer than the copy from pageable memory); the tier page-locks its slots later, off the training thread
(:meth:`MemoryTier.prepare`).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import torch

from training.checkpoint import replica
from training.checkpoint.collectives import all_gather, all_ok
from training.checkpoint.fingerprint import fingerprint
from training.checkpoint.hostbuf import Slot, decode_meta, process_id, slots
from training.checkpoint.snapshot import Layout, Split, rebuild
from training.checkpoint.snapshot_copy import SnapshotCopier
from training.checkpoint.state import AppState

#: What a slot's meta calls the data's fingerprint (a slot of another format has none and is never loaded).
DATA_KEY = "data_fingerprint"


class Tier(Protocol):
    """What a restore needs of its :class:`~training.checkpoint.memtier.MemoryTier`."""

    dir: Any
    rank: int
    world_size: int
    src: int | None
    pg: Any
    collective_timeout_s: float
    copier: SnapshotCopier

    def tensors(self, state: AppState) -> tuple[Split, Layout]: ...

    def write_slot(self, owner: int) -> Slot: ...

    def join_jobs(self, timeout_s: float) -> bool: ...


class MemoryRestore:
    """One restore of ``tier``'s snapshots (see the module docstring)."""

    def __init__(self, tier: Tier) -> None:
        self.tier = tier
        self.dir, self.rank, self.world_size = tier.dir, tier.rank, tier.world_size
        self.src, self.pg, self.collective_timeout_s = tier.src, tier.pg, tier.collective_timeout_s

    def held(self) -> list[replica.Held]:
        """The valid snapshots this rank holds: its own, and its peer's copies."""
        found = []
        for slot in slots(self.dir):
            if slot.owner not in (self.rank, self.src):
                continue
            meta = slot.read_meta()
            if meta is None:
                continue
            found.append(
                replica.Held(
                    holder=self.rank,
                    owner=meta["owner"],
                    step=meta["step"],
                    world_size=meta["world_size"],
                    signature=meta["signature"],
                    nbytes=meta["layout"].nbytes,
                    meta_len=slot.meta_path.stat().st_size,
                    slot=slot.index,
                    live=meta["process"] == process_id(),
                )
            )
        return found

    def restore(self, state: AppState, *, at_least: int, before_load: Any = None) -> dict[str, Any] | None:
        """Load the newest snapshot every rank can get (not older than ``at_least``) into ``state``; the fields of
        the ``restore`` event, or None (storage then). Collective."""
        if not self.tier.join_jobs(timeout_s=3 * self.collective_timeout_s + 10):
            print(f"[checkpoint] rank {self.rank}: a memory-tier thread is still running: its slots are not read")
        mine = self.held() if self.tier.join_jobs(0) else []
        held = [h for items in all_gather(self.pg, mine, self.world_size) for h in items]
        # Only now the state: its state dict initialises an optimizer that has no state yet (a zero-lr step of
        # torch's get_state_dict), which a fresh start must not see.
        if replica.newest_common_step(held, self.world_size, None, at_least) is None:
            return None
        pristine = not state.optimizer.state
        restored = self._restore(state, held, at_least, before_load)
        if restored is None and pristine:
            state.optimizer.state.clear()  # storage next, maybe a fresh start: as if never looked at
        return restored

    def _restore(self, state: AppState, held: list[replica.Held], at_least: int, before_load: Any) -> dict | None:
        parts, layout = self.tier.tensors(state)
        signatures = all_gather(self.pg, layout.signature, self.world_size)
        step = replica.newest_common_step(held, self.world_size, signatures, at_least)
        if step is None:
            return None
        if before_load is not None:
            before_load(step)
        copies = replica.plan(held, step, self.world_size, signatures)
        t0 = time.perf_counter()
        buf, payload = self._fetch(copies, layout.nbytes)
        meta = decode_meta(payload) if payload is not None else None
        ok = (
            meta is not None
            and meta["step"] == step
            and self.tier.copier.verify(buf, layout.nbytes, meta.get(DATA_KEY))
        )
        if not all_ok(self.pg, ok):
            print(f"[checkpoint] rank {self.rank}: snapshot of step {step} failed its checksum on a rank: storage next")
            return None
        assert meta is not None
        self.tier.copier.scatter(buf, layout, parts)
        state.load_state_dict(rebuild(meta["skeleton"], parts.objects)["app"])
        load_s = time.perf_counter() - t0
        tiers = all_gather(self.pg, replica.tier_of(copies[self.rank]), self.world_size)
        # load_s: this rank's fetch, verification and copy into the live state (rank 0's in the event)
        return {
            "from_step": step,
            "tier": replica.farthest(tiers),
            "per_rank_tier": tiers,
            "load_s": round(load_s, 4),
            "nbytes": layout.nbytes,
        }

    def _fetch(self, copies: list[replica.Held], nbytes: int) -> tuple[torch.Tensor, bytes | None]:
        """This rank's copy in a local slot (sent by its holder if that is another rank); sends what others need."""
        sends, recvs = [], []
        for c in copies:
            if c.holder == self.rank and c.owner != self.rank:
                slot = Slot(self.dir, c.owner, c.slot)
                sends.append((c.owner, torch.frombuffer(bytearray(slot.meta_path.read_bytes()), dtype=torch.uint8)))
                sends.append((c.owner, slot.data(c.nbytes, pin=False)))
        c = copies[self.rank]
        if c.holder == self.rank:
            slot = Slot(self.dir, c.owner, c.slot)
            replica.transfer(self.pg, sends, recvs)
            return slot.data(nbytes, pin=False), slot.meta_path.read_bytes()
        slot = self.tier.write_slot(self.rank)
        slot.invalidate()
        buf = slot.data(nbytes, pin=False)
        meta_in = torch.empty(c.meta_len, dtype=torch.uint8)
        recvs = [(c.holder, meta_in), (c.holder, buf)]
        replica.transfer(self.pg, sends, recvs)
        payload = meta_in.numpy().tobytes()
        meta = decode_meta(payload)
        if meta is not None and fingerprint(buf) == meta.get(DATA_KEY):
            slot.write_meta(payload)  # now this node's own copy too
        return buf, payload
