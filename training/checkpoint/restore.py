"""Restore from storage, as functions over the on-disk format: choose the newest checkpoint that verifies (the ranks
hash it together, each its share), quarantine damaged ones, refuse a silent fresh start, load it with DCP.

Collective on the checkpoint group ``pg``: every rank calls :func:`choose` and :func:`load` at the same point.
Rank 0 lists and decides; every rank verifies a share of the files (:func:`training.checkpoint.files.hash_shares`),
so every rank loads the same checkpoint. Rank 0's commit, which hashes the same bytes, held the loop ~10 s for the 1B
model (11.7 GB) on an H200 host; split, each rank reads 1/world_size of them (``python -m benchmarks.restore_verify``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.api import CheckpointException as DcpCheckpointException

from training.checkpoint.backends import reader
from training.checkpoint.collectives import broadcast
from training.checkpoint.commit import commit_finished_saves, join_commits, quarantine
from training.checkpoint.errors import CheckpointError, CheckpointReadError, CheckpointSkewError, MarkerReadError
from training.checkpoint.files import (
    QUARANTINE_DIR,
    describe_error,
    list_step_dirs,
    os_error_in,
    read_marker,
    verify_checkpoint,
)
from training.checkpoint.state import AppState
from training.common.peer_errors import causes
from training.telemetry.events import EventLog, read_events


class StorageRestore:
    """What the storage restore needs of its manager: where, who, and how to report."""

    def __init__(
        self, root: Path, rank: int, world_size: int, events: EventLog, backend: str, keep_last: int,
        arrive: Callable[[str], None] | None = None,
    ) -> None:  # fmt: skip
        self.root, self.rank, self.world_size = root, rank, world_size
        self.events, self.backend, self.keep_last = events, backend, keep_last
        #: Waits for every rank after this rank's own hashing or reading (:meth:`CheckpointManager.arrive`).
        self.arrive = arrive or (lambda what: None)

    def read_failed(self, step: int, message: str) -> CheckpointReadError:
        """A storage error while restoring ``step`` (``ckpt_failed`` with ``op=restore``); the checkpoint is kept."""
        with contextlib.suppress(OSError):  # the event log may sit on the same failing file system
            self.events.emit("ckpt_failed", step=step, error=message, op="restore", backend=self.backend)
        print(f"[checkpoint] rank {self.rank}: restore of step {step} failed: {message}", flush=True)
        return CheckpointReadError(f"restore of step {step} failed: {message}")

    def listing(self, pg: Any) -> dict[str, Any]:
        """Rank 0 commits the finished saves, removes the unfinished ones and lists the ``step_N`` dirs, newest
        first (``{"candidates": [(step, path)]}``); the same on every rank."""
        listing: dict[str, Any] = {}
        if self.rank == 0:
            try:
                # A commit of this process may still run (the loop failed after the write finished): it finishes
                # first, so its checkpoint counts and its directory is not taken for an unfinished one.
                join_commits()
                commit_finished_saves(self.root, backend=self.backend, events=self.events, keep_last=self.keep_last)
                listing = {"candidates": [(step, str(path)) for step, path in reversed(list_step_dirs(self.root))]}
            except OSError as exc:  # a storage error, not a reason to give up on the checkpoints
                listing = {"storage": f"cannot list the checkpoint root {self.root}: {describe_error(exc)}"}
        listing = broadcast(pg, listing)
        if "storage" in listing:
            raise self.read_failed(-1, listing["storage"])
        return listing

    def choose(self, pg: Any, listing: dict[str, Any], allow_fresh_start: bool) -> dict[str, Any]:
        """The newest checkpoint that verifies (quarantining bad ones), or why there is none."""
        for step, name in listing["candidates"]:
            reason = self.verify_together(pg, step, Path(name))
            if reason is None:
                return {"step": step, "path": name}
            if self.rank == 0:
                try:
                    quarantine(self.root, step, Path(name), reason, self.events)
                except OSError as exc:  # the next restore verifies it again
                    print(f"[checkpoint] could not quarantine {name} ({reason}): {describe_error(exc)}", flush=True)
        choice: dict[str, Any] = {}
        if self.rank == 0:
            quarantined = sorted(p.name for p in (self.root / QUARANTINE_DIR).glob("step_*"))
            lost = None if quarantined or allow_fresh_start else self.lost_commits()
            if quarantined and not allow_fresh_start:
                choice = {"error": f"no usable checkpoint in {self.root}; quarantined: {', '.join(quarantined)}"}
            elif lost is not None:
                choice = {"lost": lost}
            else:
                choice = {"step": None, "quarantined": quarantined}
        return broadcast(pg, choice)

    def lost_commits(self) -> str | None:
        """Rank 0, with no checkpoint under the root: why this cannot be a fresh start (the run's event log records
        commits), else None."""
        try:
            committed = [e for e in read_events(self.events.path.parent) if e["event"] == "ckpt_committed"]
        except FileNotFoundError:
            return None
        if not committed:
            return None
        newest = max(committed, key=lambda e: e["step"])
        state = "does not exist" if not self.root.exists() else "holds no checkpoint"
        return (
            f"the checkpoint root {self.root} {state}, but this run's event log ({self.events.path}) records "
            f"{len(committed)} committed checkpoint(s), the newest of step {newest['step']} at {newest.get('path')}. "
            "Check that the checkpoint volume is mounted (on Kubernetes: the FSx PersistentVolumeClaim) and that "
            "checkpoint.dir did not change. Refusing to start again from step 0; to start over on purpose, launch "
            "with --fresh (honoured once per run directory) or use a new run directory"
        )

    def verify_together(self, pg: Any, step: int, path: Path) -> str | None:
        """:func:`verify_checkpoint` with the hashing split between the ranks; the same answer on every rank.

        None when the checkpoint verifies, else why it is damaged. A commit marker or a file that a rank cannot read
        (after retries) raises :class:`CheckpointReadError` on every rank instead: a storage error is no evidence of a
        damaged checkpoint, so the checkpoint is neither skipped nor quarantined.
        """
        reason: str | None = None
        storage: str | None = None
        try:
            reason = verify_checkpoint(path, share=(self.rank, self.world_size), check_layout=self.rank == 0)
        except MarkerReadError as exc:
            storage = f"rank {self.rank}: {exc}"
        except FileNotFoundError as exc:  # gone between the listing and the read
            reason = f"missing: {describe_error(exc)}"
        except OSError as exc:  # retried already: a storage error, never a reason to quarantine
            storage = (
                f"rank {self.rank}: cannot read {path}: {describe_error(exc)} (after retries); the checkpoint is kept"
            )
        verdicts: list[tuple[str | None, str | None]] = [(reason, storage)]
        self._arrive(step, "hashing")
        if pg is not None:
            verdicts = [(None, None)] * self.world_size
            dist.all_gather_object(verdicts, (reason, storage), group=pg)
        storage = next((s for _, s in verdicts if s), None)
        if storage is not None:
            raise self.read_failed(step, storage)
        return next((r for r, _ in verdicts if r), None)

    def _arrive(self, step: int, what: str) -> None:
        """:attr:`arrive`; past its deadline a storage error of this restore (``ckpt_failed``; the ledger counts it)."""
        skew: CheckpointSkewError | None = None
        try:
            self.arrive(what)
        except CheckpointSkewError as exc:
            skew = exc
        if skew is not None:  # raised outside the handler: the error wraps only the skew
            raise self.read_failed(step, str(skew)) from skew

    def load(self, pg: Any, state: AppState, step: int, path: Path) -> dict[str, Any]:
        """Load the verified checkpoint ``path`` of ``step`` into ``state``; the fields of its ``restore`` event."""
        skew: CheckpointSkewError | None = None
        try:
            metadata = FileSystemReader(path).read_metadata()
            source = state.prepare_load(metadata.state_dict_metadata.keys())
            state_dict = {"app": state.state_dict()}
            dcp.load(state_dict, storage_reader=reader(path, lambda: self.arrive("reading")), process_group=pg)
        except (Exception, DcpCheckpointException) as exc:  # DCP's exception is a BaseException: no restart layer
            # would see it, nor the failure ledger. A skew is raised below, outside the handler: DCP's exception
            # also carries the peers' gloo errors, which would make it a lost peer.
            skew = next((e for e in causes(exc) if isinstance(e, CheckpointSkewError)), None)
            if skew is not None:
                pass
            elif os_error_in(exc) is not None:
                raise self.read_failed(step, f"{path}: {describe_error(exc)}") from exc
            elif isinstance(exc, DcpCheckpointException):
                raise CheckpointError(f"restore of step {step} from {path} failed: {describe_error(exc)}") from exc
            else:
                raise
        if skew is not None:
            raise self.read_failed(step, str(skew)) from skew
        state.load_state_dict(state_dict["app"])
        if state.step != step:
            raise CheckpointError(f"{path} holds step {state.step}, its name says {step}")
        marker = read_marker(path) or {}
        return {
            "path": str(path),
            "saved_world_size": marker.get("world_size"),
            "world_size": self.world_size,
            "per_rank_source": source,
        }
