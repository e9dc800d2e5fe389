"""The memory tier: snapshots into host buffers at the steps of a :class:`MemorySchedule` (every N steps, or
``auto``: as often as ``checkpoint.memory_overhead_budget`` allows), and a copy on a peer node.

Save (every rank, the same steps): the training thread starts copying the state into one of this rank's two slots
(the other keeps the previous snapshot whole) through a :class:`SnapshotCopier` (on CUDA: staged on the GPU, drained
on a side stream; the optimizer step waits on the GPU only for the reads of the live state). The state's tensors are
taken apart once per (re)start and reused (:meth:`MemoryTier._tensors`); each snapshot adds only the small host state
(step, sampler, RNG). A thread of its own (``memtier``) then waits for the copy, fingerprints the bytes unless the GPU
did, publishes the slot's meta and exchanges snapshots with the peers (:func:`training.checkpoint.replica.exchange`):
the next snapshot waits for it (back-pressure, at most one in flight). A failed exchange is tried again on a new group
at a later snapshot (:class:`PeerCopies`). Every snapshot carries the run's id (:mod:`.run_identity`).

Restore (collective, before storage): every rank lists the snapshots it holds, the newest step every rank can get wins
(when it is not older than the newest committed storage checkpoint), copies travel from their holders, each rank
verifies the fingerprint (:mod:`training.checkpoint.fingerprint`) of what it loads (on the GPU where there is room),
and the ``restore`` event names the farthest tier any rank used: ``memory`` (this process' own buffers, after an
in-process restart), ``shm`` (``/dev/shm`` after ft_launcher respawned the workers in the same pod), ``peer``
(another node's copy, for a replaced node).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from training.checkpoint import host_slots
from training.checkpoint.hostbuf import Slot, encode_meta, pinning_notice, process_id, slots
from training.checkpoint.memory_interval import MemorySchedule
from training.checkpoint.memory_restore import DATA_KEY, MemoryRestore
from training.checkpoint.peer_copies import PeerCopies
from training.checkpoint.run_identity import RunIdentity, read_run_id
from training.checkpoint.shm_scope import scope_dir
from training.checkpoint.snapshot import Layout, Split, layout_of, split
from training.checkpoint.snapshot_copy import PendingCopy, SnapshotCopier, allocator_retries
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
    """Whether this host's memory tier of checkpoint root ``root`` holds a valid snapshot (own or a peer's copy) of
    the run whose id that root keeps (:mod:`.run_identity`)."""
    run = read_run_id(root)
    return run is not None and any((m := s.read_meta()) and m.get("run") == run for s in slots(scope_dir(root)))


def _agree_max(values: list[float]) -> list[float]:
    """The element-wise maximum over the ranks of the default group (on its device)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return values
    dev = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    t = torch.tensor(values, dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t.tolist()]


class MemoryTier:
    """One rank's memory tier for a checkpoint root. Collective: construct, :meth:`step_done`, :meth:`snapshot` and
    :meth:`restore` on every rank at the same steps.

    ``interval``: steps between snapshots, or ``"auto"`` (:class:`MemorySchedule`, with ``budget`` and ``ceiling``).
    ``arrive(what)``: the long-deadline barrier after a rank's own bulk I/O (:meth:`CheckpointManager.arrive`).
    """

    def __init__(
        self,
        root: Path,
        interval: int | str,
        rank: int,
        world_size: int,
        per_node: int,
        events: EventLog,
        *,
        collective_timeout_s: float,
        budget: float = 0.01,
        ceiling: int = 1_000_000,
        arrive: Callable[[str], None] | None = None,
    ) -> None:
        self.dir = scope_dir(root)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rank, self.world_size, self.events = rank, world_size, events
        self.schedule = MemorySchedule(interval, budget=budget, ceiling=ceiling, agree=_agree_max)  # type: ignore[arg-type]
        self.collective_timeout_s = collective_timeout_s
        self.peers = PeerCopies(
            rank, world_size, per_node, collective_timeout_s, agree=_agree_max, write_slot=self.write_slot
        )
        self.dst, self.src = self.peers.dst, self.peers.src
        self.identity = RunIdentity(root, rank, self.pg)
        self.arrive = arrive or (lambda what: None)
        self.copier = SnapshotCopier()
        self._tensor_cache: tuple[int, Split, Layout] | None = None
        self.slots = host_slots.adopt(self.dir, rank, events, report=self._report, before=self.identity.keep)
        if rank == 0:
            where = f"copy on rank {self.dst}'s node" if self.dst is not None else "no peer copy (one node)"
            every = "auto interval" if self.schedule.auto else f"every {interval} steps"
            print(f"[checkpoint] memory tier ({every}) in {self.dir}: {pinning_notice()}; {where}", flush=True)

    @staticmethod
    def join_jobs(timeout_s: float) -> bool:
        return join_jobs(timeout_s)

    @property
    def pg(self) -> Any:
        """The tier's gloo group (a new one after a failed peer exchange: :class:`PeerCopies`)."""
        return self.peers.pg

    @property
    def run_id(self) -> str:
        return self.identity.id

    @property
    def interval(self) -> int:
        return self.schedule.interval

    def due(self, step: int) -> bool:
        """Whether to snapshot after ``step``: the schedule's steps, once every rank's slots are mapped (until then a
        due snapshot waits for a later step: page-locking an 11 GB slot takes seconds, and the loop must not wait for
        it; the ranks agree, since the peer copies are collective)."""
        return self.schedule.due(step) and self.slots.ready(_agree_max)

    def step_done(self, step: int, step_s: float) -> None:
        """Every step on every rank: the ``auto`` interval's measurements (see :class:`MemorySchedule`)."""
        line = self.schedule.step_done(step, step_s)
        if line is not None and self.rank == 0:
            print(f"[checkpoint] {line}", flush=True)
            with contextlib.suppress(OSError):
                self.events.emit(
                    "mem_interval",
                    step=step,
                    interval=self.schedule.interval,
                    cost_s=round(self.schedule.cost_s or 0.0, 6),
                    step_s=round(self.schedule.step_s or 0.0, 6),
                    budget=self.schedule.budget,
                )

    def write_slot(self, owner: int) -> Slot:
        """The slot of ``owner`` to write next: one without a snapshot, else the one with the older."""
        pair = [Slot(self.dir, owner, k) for k in (0, 1)]
        steps = [(m["step"] if (m := s.read_meta()) else -1) for s in pair]
        return pair[0] if steps[0] <= steps[1] else pair[1]

    def tensors(self, state: AppState) -> tuple[Split, Layout]:
        """The model's and optimizer's tensors taken apart, once per state generation (they are the live tensors,
        so later steps' values show through), and their layout."""
        if self._tensor_cache is None or self._tensor_cache[0] != state.generation:
            parts = split(state.tensor_state())
            self._tensor_cache = (state.generation, parts, layout_of(parts))
        _, parts, layout = self._tensor_cache
        return parts, layout

    @staticmethod
    def _skeleton(parts: Split, state: AppState) -> dict[str, Any]:
        """The snapshot's non-tensor part: the tensors' skeleton with the optimizer's current hyper-parameters (the
        learning rate moves every step), and the host state."""
        skeleton = dict(parts.skeleton)
        optim = dict(skeleton["optim"])
        optim["param_groups"] = [
            {**saved, **{k: v for k, v in live.items() if k != "params"}}
            for saved, live in zip(optim["param_groups"], state.optimizer.param_groups, strict=True)
        ]
        skeleton["optim"] = optim
        return {"app": {**skeleton, **state.host_state()}}

    # ------------------------------------------------------------------ save
    def prepare(self, state: AppState) -> None:
        """Once per (re)start after the first optimizer step: size the copies (the GPU's staging buffer), then ready
        both host slots on a thread (:class:`~training.checkpoint.host_slots.HostSlots`: those begun at start-up when
        there were), which the first snapshot waits for: no snapshot pays for an allocation."""
        if self.slots.started:
            return
        _, layout = self.tensors(state)
        how = self.copier.prepare(layout.nbytes)
        self.slots.start(layout.nbytes, how, wait=not self.copier.cuda)

    def snapshot(self, step: int, state: AppState) -> None:
        """Start copying ``state`` into this rank's slot; the fingerprint and the peer copy continue on the
        ``memtier`` thread."""
        self.prepare(state)
        self.slots.join()  # done already when :meth:`due` said so
        t0 = time.perf_counter()
        self.wait()
        waited = time.perf_counter() - t0
        line = self.peers.before_snapshot(step)
        if line is not None and self.rank == 0:
            print(f"[checkpoint] memory tier: {line}", flush=True)
        parts, layout = self.tensors(state)
        slot = self.write_slot(self.rank)
        slot.invalidate()
        pending: PendingCopy | None = None
        host: torch.Tensor | None = None
        try:
            host = slot.data(layout.nbytes)
            pending = self.copier.save(host, layout, parts)
        except OSError as exc:
            self._report(step, f"no host memory for the snapshot ({layout.nbytes} bytes in {self.dir}): {exc}")
        meta = {
            "step": step,
            "owner": self.rank,
            "world_size": self.world_size,
            "signature": layout.signature,
            "layout": layout,
            "skeleton": self._skeleton(parts, state),
            "process": process_id(),
            "run": self.run_id,
        }
        stall = time.perf_counter() - t0
        self.schedule.snapshot_taken(step, stall)
        job = threading.Thread(
            target=self._finish,
            args=(step, slot, host, pending, meta, (stall, waited)),
            name=MEMTIER_THREAD,
            daemon=True,
        )
        _JOBS.append(job)
        job.start()

    def before_optimizer_step(self) -> None:
        """The optimizer step changes what a snapshot in flight still reads: it waits for those reads (on CUDA, on
        the GPU; nothing to wait for on the CPU, where the copy is done before :meth:`snapshot` returns)."""
        self.copier.before_optimizer_step()

    def wait(self) -> None:
        """Wait for this tier's snapshot in flight (its fingerprint and peer copy)."""
        join_jobs(timeout_s=10 * self.collective_timeout_s + 60)

    def _finish(
        self, step: int, slot: Slot, host: torch.Tensor | None, pending: PendingCopy | None, meta: dict,
        stalls: tuple[float, float],
    ) -> None:  # fmt: skip
        """Wait for the copy, publish the slot's meta, copy to the peer, then the ``mem_snapshot`` event; ``stalls``:
        the training thread's seconds in :meth:`snapshot`, and the part of them spent waiting for the previous one."""
        payload: bytes | None = None
        t0 = time.perf_counter()
        if host is not None and pending is not None:
            try:
                meta[DATA_KEY] = pending.fingerprint(host, meta["layout"].nbytes)
                self.copier.holds(meta[DATA_KEY], staged_whole=pending.parts_host is not None)
                payload = encode_meta(meta)
                slot.write_meta(payload)
            except OSError as exc:
                self._report(step, f"could not publish the snapshot in {slot.meta_path}: {exc}")
        drained = time.perf_counter() - t0
        data = (payload, host) if payload and host is not None else None
        replicated = self.peers.exchange(step, data, self._report)
        if self.rank == 0 and payload is not None:
            with contextlib.suppress(OSError):
                self.events.emit(
                    "mem_snapshot",
                    step=step,
                    stall_s=round(stalls[0], 6),
                    waited_s=round(stalls[1], 6),
                    background_s=round(drained, 6),
                    replicated=replicated,
                    nbytes=meta["layout"].nbytes,
                    **allocator_retries(),
                )

    def _report(self, step: int, message: str) -> None:
        """A memory-tier failure, reported when it happens (the run goes on: storage still holds its checkpoints)."""
        print(f"[checkpoint] rank {self.rank}: memory snapshot of step {step}: {message}", flush=True)
        with contextlib.suppress(OSError):
            self.events.emit("mem_snapshot", step=step, stall_s=0.0, error=message[:500])

    # ------------------------------------------------------------------ restore
    def restore(
        self, state: AppState, *, at_least: int, before_load: Any = None, fresh: bool = False
    ) -> dict[str, Any] | None:
        """Load the newest snapshot every rank can get (at least ``at_least``): the ``restore`` event's fields, or None.
        ``fresh`` (rank 0's): a new run id, older snapshots removed. Collective (see :class:`MemoryRestore`)."""
        self.identity.restoring(self.pg, fresh=fresh)
        return MemoryRestore(self).restore(state, at_least=at_least, before_load=before_load)

    def release(self) -> None:
        """The run is over: remove this rank's slots (own and peer copies) and the directory once empty."""
        self.wait()
        for owner in {self.rank, self.src} - {None}:
            for k in (0, 1):
                Slot(self.dir, owner, k).remove()  # type: ignore[arg-type]
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)

    def close(self, *, collective: bool) -> None:
        """Close; on the error path the GPU copy of the newest snapshot goes to the next restore (``hand_over``)."""
        if collective and self.pg is not None and dist.is_initialized():
            self.wait()
            dist.destroy_process_group(self.pg)
        if not collective:
            self.copier.hand_over()
        self.peers.pg = None
