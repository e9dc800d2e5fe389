"""The memory tier: a snapshot every ``checkpoint.memory_interval_steps`` into host buffers, a copy on a peer node.

Save (every rank, the same steps): the training thread copies the state into one of this rank's two slots (the other
keeps the previous snapshot whole), asynchronously on a side stream on CUDA, where the loop waits only before the
next optimizer step (:meth:`MemoryTier.before_optimizer_step`). A thread of its own (``memtier``) then hashes the
bytes, publishes the slot's meta and exchanges snapshots with the peers (:func:`training.checkpoint.replica.exchange`):
the next snapshot waits for it (back-pressure, at most one in flight).

Restore (collective, before storage): every rank lists the snapshots it holds, the newest step every rank can get wins
(when it is not older than the newest committed storage checkpoint), copies travel from their holders, each rank
verifies the sha256 of what it loads, and the ``restore`` event names the farthest tier any rank used: ``memory``
(this process' own buffers, after an in-process restart), ``shm`` (``/dev/shm`` after ft_launcher respawned the
workers in the same pod), ``peer`` (another node's copy, for a replaced node).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from training.checkpoint import replica
from training.checkpoint.collectives import all_gather, all_ok
from training.checkpoint.hostbuf import (
    Slot,
    decode_meta,
    encode_meta,
    pinning_notice,
    process_id,
    sha256_tensor,
    slots,
)
from training.checkpoint.shm_scope import scope_dir
from training.checkpoint.snapshot import copy_in, copy_out, layout_of, rebuild, split
from training.checkpoint.state import AppState
from training.telemetry.events import EventLog

MEMTIER_THREAD = "memtier"
#: The background parts of every memory tier of this process (joined before a restore reads the slots).
_JOBS: list[threading.Thread] = []


def join_jobs(timeout_s: float) -> bool:
    """Wait for this process' memory-tier threads; False if one is still running after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    for t in list(_JOBS):
        t.join(max(0.0, deadline - time.monotonic()))
    _JOBS[:] = [t for t in _JOBS if t.is_alive()]
    return not _JOBS


def holds_snapshot(root: Path) -> bool:
    """Whether this host's memory tier of checkpoint root ``root`` holds a valid snapshot (own or a peer's copy)."""
    return any(slot.read_meta() is not None for slot in slots(scope_dir(root)))


class MemoryTier:
    """One rank's memory tier for a checkpoint root. Collective: construct, :meth:`snapshot` and :meth:`restore` on
    every rank at the same steps."""

    def __init__(
        self,
        root: Path,
        interval: int,
        rank: int,
        world_size: int,
        per_node: int,
        events: EventLog,
        *,
        collective_timeout_s: float,
    ) -> None:
        self.dir = scope_dir(root)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.interval, self.rank, self.world_size, self.events = interval, rank, world_size, events
        self.dst, self.src = replica.peers(rank, world_size, per_node)
        self.collective_timeout_s = collective_timeout_s
        timeout = datetime.timedelta(seconds=collective_timeout_s)
        self.pg = dist.new_group(backend="gloo", timeout=timeout) if dist.is_initialized() and world_size > 1 else None
        self._stream = torch.cuda.Stream() if torch.cuda.is_available() else None
        self._copied: Any = None  # the CUDA event of the last snapshot's copy
        self._broken: str | None = None  # why replication stopped until the next (re)start (a failed exchange)
        if rank == 0:
            where = f"copy on rank {self.dst}'s node" if self.dst is not None else "no peer copy (one node)"
            print(f"[checkpoint] memory tier every {interval} steps in {self.dir}: {pinning_notice()}; {where}")

    def due(self, step: int) -> bool:
        return self.interval > 0 and step % self.interval == 0

    def _write_slot(self, owner: int) -> Slot:
        """The slot of ``owner`` to write next: one without a snapshot, else the one with the older."""
        pair = [Slot(self.dir, owner, k) for k in (0, 1)]
        steps = [(m["step"] if (m := s.read_meta()) else -1) for s in pair]
        return pair[0] if steps[0] <= steps[1] else pair[1]

    # ------------------------------------------------------------------ save
    def snapshot(self, step: int, state: AppState) -> None:
        """Copy ``state`` into this rank's slot; hashing and the peer copy continue on the ``memtier`` thread."""
        t0 = time.perf_counter()
        self.wait()
        parts = split({"app": state.state_dict()})
        layout = layout_of(parts)
        slot = self._write_slot(self.rank)
        slot.invalidate()
        buf: torch.Tensor | None = None
        try:
            buf = slot.data(layout.nbytes)
        except OSError as exc:
            self._report(step, f"no host memory for the snapshot ({layout.nbytes} bytes in {self.dir}): {exc}")
        if buf is not None and self._stream is not None:
            self._stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self._stream):
                copy_in(buf, layout, parts, non_blocking=True)
            self._copied = torch.cuda.Event()
            self._copied.record(self._stream)
        elif buf is not None:
            copy_in(buf, layout, parts)
        meta = {
            "step": step,
            "owner": self.rank,
            "world_size": self.world_size,
            "signature": layout.signature,
            "layout": layout,
            "skeleton": parts.skeleton,
            "process": process_id(),
        }
        stall = time.perf_counter() - t0
        job = threading.Thread(
            target=self._finish, args=(step, slot, buf, meta, self._copied, stall), name=MEMTIER_THREAD, daemon=True
        )
        _JOBS.append(job)
        job.start()

    def before_optimizer_step(self) -> None:
        """On CUDA: wait until the snapshot's device-to-host copy is done (the optimizer step changes its source)."""
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None

    def wait(self) -> None:
        """Wait for this tier's snapshot in flight (its hashing and peer copy)."""
        join_jobs(timeout_s=10 * self.collective_timeout_s + 60)

    def _finish(self, step: int, slot: Slot, buf: torch.Tensor | None, meta: dict, copied: Any, stall: float) -> None:
        payload: bytes | None = None
        if buf is not None:
            try:
                if copied is not None:
                    copied.synchronize()
                meta["data_sha256"] = sha256_tensor(buf)
                payload = encode_meta(meta)
                slot.write_meta(payload)
            except OSError as exc:
                self._report(step, f"could not publish the snapshot in {slot.meta_path}: {exc}")
        replicated = False
        if self.pg is not None and self.dst is not None and self.src is not None and self._broken is None:
            try:
                got = replica.exchange(self.pg, self.dst, self.src, (payload, buf) if payload else None, self._peer_buf)
                replicated = got is not None and self._keep_peer_copy(*got)
            except Exception as exc:  # a lost peer: gloo's deadline; the group cannot be trusted any more
                self._broken = f"{type(exc).__name__}: {str(exc)[:300]}"
                self._report(step, f"peer copy failed, no more peer copies until the next restart: {self._broken}")
        if self.rank == 0 and payload is not None:
            with contextlib.suppress(OSError):
                self.events.emit("mem_snapshot", step=step, stall_s=round(stall, 6), replicated=replicated)

    def _peer_buf(self, nbytes: int) -> torch.Tensor:
        assert self.src is not None
        self._peer_slot = self._write_slot(self.src)
        self._peer_slot.invalidate()
        return self._peer_slot.data(nbytes)

    def _keep_peer_copy(self, payload: bytes, data: torch.Tensor) -> bool:
        """Publish a received copy if its meta and data digests match (else it stays invalid, and says so)."""
        meta = decode_meta(payload)
        if meta is None or sha256_tensor(data) != meta.get("data_sha256"):
            print(f"[checkpoint] rank {self.rank}: the peer copy from rank {self.src} failed its checksum", flush=True)
            return False
        self._peer_slot.write_meta(payload)
        return True

    def _report(self, step: int, message: str) -> None:
        """A memory-tier failure, reported when it happens (the run goes on: storage still holds its checkpoints)."""
        print(f"[checkpoint] rank {self.rank}: memory snapshot of step {step}: {message}", flush=True)
        with contextlib.suppress(OSError):
            self.events.emit("mem_snapshot", step=step, stall_s=0.0, error=message[:500])

    # ------------------------------------------------------------------ restore
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
        if not join_jobs(timeout_s=3 * self.collective_timeout_s + 10):
            print(f"[checkpoint] rank {self.rank}: a memory-tier thread is still running: its slots are not read")
        held = [h for items in all_gather(self.pg, self.held() if not _JOBS else [], self.world_size) for h in items]
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
        mine = split({"app": state.state_dict()})
        layout = layout_of(mine)
        signatures = all_gather(self.pg, layout.signature, self.world_size)
        step = replica.newest_common_step(held, self.world_size, signatures, at_least)
        if step is None:
            return None
        if before_load is not None:
            before_load(step)
        copies = replica.plan(held, step, self.world_size, signatures)
        buf, payload = self._fetch(copies, layout.nbytes)
        meta = decode_meta(payload) if payload is not None else None
        ok = meta is not None and meta["step"] == step and sha256_tensor(buf) == meta.get("data_sha256")
        if not all_ok(self.pg, ok):
            print(f"[checkpoint] rank {self.rank}: snapshot of step {step} failed its checksum on a rank: storage next")
            return None
        assert meta is not None
        copy_out(buf, layout, mine)
        state.load_state_dict(rebuild(meta["skeleton"], mine.objects)["app"])
        tiers = all_gather(self.pg, replica.tier_of(copies[self.rank]), self.world_size)
        return {"from_step": step, "tier": replica.farthest(tiers), "per_rank_tier": tiers}

    def _fetch(self, copies: list[replica.Held], nbytes: int) -> tuple[torch.Tensor, bytes | None]:
        """This rank's copy in a local slot (sent by its holder if that is another rank); sends what others need."""
        sends, recvs = [], []
        for c in copies:
            if c.holder == self.rank and c.owner != self.rank:
                slot = Slot(self.dir, c.owner, c.slot)
                sends.append((c.owner, torch.frombuffer(bytearray(slot.meta_path.read_bytes()), dtype=torch.uint8)))
                sends.append((c.owner, slot.data(c.nbytes)))
        c = copies[self.rank]
        if c.holder == self.rank:
            slot = Slot(self.dir, c.owner, c.slot)
            replica.transfer(self.pg, sends, recvs)
            return slot.data(nbytes), slot.meta_path.read_bytes()
        slot = self._write_slot(self.rank)
        slot.invalidate()
        buf = slot.data(nbytes)
        meta_in = torch.empty(c.meta_len, dtype=torch.uint8)
        recvs = [(c.holder, meta_in), (c.holder, buf)]
        replica.transfer(self.pg, sends, recvs)
        payload = meta_in.numpy().tobytes()
        meta = decode_meta(payload)
        if meta is not None and sha256_tensor(buf) == meta.get("data_sha256"):
            slot.write_meta(payload)  # now this node's own copy too
        return buf, payload

    def release(self) -> None:
        """The run is over: remove this rank's slots (own and peer copies) and the directory once empty."""
        self.wait()
        for owner in {self.rank, self.src} - {None}:
            for k in (0, 1):
                Slot(self.dir, owner, k).remove()  # type: ignore[arg-type]
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)

    def close(self, *, collective: bool) -> None:
        if collective and self.pg is not None and dist.is_initialized():
            self.wait()
            dist.destroy_process_group(self.pg)
        self.pg = None
