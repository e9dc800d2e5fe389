"""The memory tier's restore (collective, before storage): every rank lists the snapshots it holds, the newest step
every rank can get wins (when it is not older than the newest committed storage checkpoint), copies travel from their
holders, each rank verifies the fingerprint of what it loads (on the GPU where there is room:
:meth:`SnapshotCopier.verify`), and the ``restore`` event names the farthest tier any rank used. A copy that fails its
checksum is dropped, and the ranks try the newest step every rank can still get, older ones included, before storage.

Only the run's own snapshots count (their meta's ``run`` is the tier's run id: :mod:`.run_identity`); another run's
are removed. The ranks meet at the long-deadline barrier (``tier.arrive``) after their own bulk work (finishing the
snapshot in flight; fetching and verifying a copy) and before the collectives on the tier's short deadline; they start
reading a copy together, on the short deadline.

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
from training.checkpoint.restore_copy import let_go_handed_over
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
    run_id: str

    def arrive(self, what: str) -> None: ...

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
        """The valid snapshots of this run that this rank holds: its own, and its peer's copies. Removes those of
        another run."""
        found, others = [], set()
        for slot in slots(self.dir):
            if slot.owner not in (self.rank, self.src):
                continue
            meta = slot.read_meta()
            if meta is None:
                continue
            if meta.get("run") != self.tier.run_id:
                slot.remove()
                others.add(f"{meta.get('run')} (step {meta['step']})")
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
        if others:
            print(
                f"[checkpoint] rank {self.rank}: removed {len(others)} memory snapshot(s) of another run from "
                f"{self.dir}: run {', '.join(sorted(others))}; this run is {self.tier.run_id}",
                flush=True,
            )
        return found

    def restore(self, state: AppState, *, at_least: int, before_load: Any = None) -> dict[str, Any] | None:
        """Load the newest snapshot every rank can get (not older than ``at_least``) into ``state``; the fields of
        the ``restore`` event, or None (storage then). Collective."""
        if not self.tier.join_jobs(timeout_s=3 * self.collective_timeout_s + 10):
            print(f"[checkpoint] rank {self.rank}: a memory-tier thread is still running: its slots are not read")
        mine = self.held() if self.tier.join_jobs(0) else []
        self.tier.arrive("memory-tier work in flight")
        held = [h for items in all_gather(self.pg, mine, self.world_size) for h in items]
        # Only now the state: its state dict initialises an optimizer that has no state yet (a zero-lr step of
        # torch's get_state_dict), which a fresh start must not see.
        if replica.newest_common_step(held, self.world_size, None, at_least) is None:
            let_go_handed_over()
            return None
        pristine = not state.optimizer.state
        try:
            restored = self._restore(state, held, at_least, before_load)
        finally:
            let_go_handed_over()
        if restored is None and pristine:
            state.optimizer.state.clear()  # storage next, maybe a fresh start: as if never looked at
        return restored

    def _restore(self, state: AppState, held: list[replica.Held], at_least: int, before_load: Any) -> dict | None:
        parts, layout = self.tier.tensors(state)
        signatures = all_gather(self.pg, layout.signature, self.world_size)
        t0 = time.perf_counter()
        while True:
            step = replica.newest_common_step(held, self.world_size, signatures, at_least)
            if step is None:
                return None
            if before_load is not None:
                before_load(step)
            # The ranks start reading together, on the short deadline (as a copy from a peer does): one stuck before
            # its read is found here; the long-deadline barrier covers only the reads themselves.
            all_ok(self.pg, True)
            copies = replica.plan(held, step, self.world_size, signatures)
            buf, meta = self._fetch_and_verify(copies, layout.nbytes, step)
            self.tier.arrive(f"reading of the memory snapshot of step {step}")
            oks = all_gather(self.pg, meta is not None, self.world_size)
            if all(oks):
                break
            failed = [rank for rank, ok in enumerate(oks) if not ok]
            print(
                f"[checkpoint] rank {self.rank}: the snapshot of step {step} failed its checksum on rank(s) {failed}: "
                "trying the newest step every rank can get without those copies",
                flush=True,
            )
            held = [h for h in held if h not in {copies[rank] for rank in failed}]
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
            "copy": self.tier.copier.restored_from,
        }

    def _fetch_and_verify(self, copies: list[replica.Held], nbytes: int, step: int) -> tuple[torch.Tensor, dict | None]:
        """This rank's copy of ``step`` and its meta, or its meta None when the copy does not verify (a copy in one
        of this rank's slots is then dropped)."""
        buf, payload = self._fetch(copies, nbytes)
        meta = decode_meta(payload) if payload is not None else None
        if meta is not None and meta["step"] == step and self.tier.copier.verify(buf, nbytes, meta.get(DATA_KEY)):
            return buf, meta
        c = copies[self.rank]
        print(f"[checkpoint] rank {self.rank}: snapshot of step {step} (rank {c.holder}'s copy) fails its checksum")
        if c.holder == self.rank:
            Slot(self.dir, c.owner, c.slot).invalidate()
        return buf, None

    def _fetch(self, copies: list[replica.Held], nbytes: int) -> tuple[torch.Tensor, bytes | None]:
        """This rank's copy in a local slot (sent by its holder if that is another rank); sends what others need."""
        sends, recvs = [], []
        for c in copies:
            if c.holder == self.rank and c.owner != self.rank:
                slot = Slot(self.dir, c.owner, c.slot)
                meta = _meta_bytes(slot)
                if meta is None or len(meta) != c.meta_len:  # changed since the listing: zeros, which do not verify
                    meta = bytes(c.meta_len)
                sends.append((c.owner, torch.frombuffer(bytearray(meta), dtype=torch.uint8)))
                sends.append((c.owner, slot.data(c.nbytes, pin=False)))
        c = copies[self.rank]
        if c.holder == self.rank:
            slot = Slot(self.dir, c.owner, c.slot)
            replica.transfer(self.pg, sends, recvs)
            return slot.data(nbytes, pin=False), _meta_bytes(slot)
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


def _meta_bytes(slot: Slot) -> bytes | None:
    """The bytes of ``slot``'s meta file, or None once it is gone (invalidated since the listing)."""
    try:
        return slot.meta_path.read_bytes()
    except FileNotFoundError:
        return None
