"""Which run the memory tier's snapshots belong to: an id made when a run starts without one and kept in its
checkpoint root (:data:`RUN_ID_FILE`), so that every relaunch of the run (an in-process restart, ft_launcher's new
workers, a replaced pod) finds the same id, and every snapshot's meta carries it.

A scope's ``/dev/shm`` can outlive a run: a pod whose workers restart keeps it, and ``python -m training.train`` run
by hand uses the host's. A snapshot whose id is not the run's is another run's: the restore never loads it and removes
it. A new id is made when the checkpoint root holds none (a new run, or one whose root was emptied, as
``training.local --fresh`` empties its run directory) and at a fresh start (``--fresh``, honoured for a run's first
launch only).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from training.checkpoint.collectives import broadcast

#: The file in the checkpoint root that holds the run's id (one line).
RUN_ID_FILE = "memory_tier_run_id"


def read_run_id(root: Path) -> str | None:
    """The id kept in checkpoint root ``root``, or None (no run has kept one there)."""
    try:
        return (Path(root) / RUN_ID_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


class RunIdentity:
    """The run's id on every rank (rank 0 reads or makes it, the others get it over ``pg``). Collective."""

    def __init__(self, root: Path, rank: int, pg: Any) -> None:
        self.root, self.rank = Path(root), rank
        found = read_run_id(self.root) if rank == 0 else None
        self.id, self.unsaved = broadcast(pg, (found, False) if found else (uuid.uuid4().hex, True))

    def restoring(self, pg: Any, *, fresh: bool) -> None:
        """Before a restore, collective: at a fresh start (rank 0's ``fresh`` holds for every rank) a new id, so that
        no snapshot of before counts."""
        mine = (uuid.uuid4().hex, True, True) if fresh else (self.id, self.unsaved, False)
        self.id, self.unsaved, fresh = broadcast(pg, mine)
        if fresh and self.root.is_dir():  # else once the run writes there (:meth:`keep`): a missing root stays missing
            self.keep()

    def keep(self) -> None:
        """Rank 0 writes a new id into the checkpoint root, once (before the run's first snapshot)."""
        if self.rank != 0 or not self.unsaved:
            return
        path = self.root / RUN_ID_FILE
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            part = path.with_name(path.name + ".part")
            part.write_text(self.id + "\n")
            os.replace(part, path)
            self.unsaved = False
        except OSError as exc:
            print(
                f"[checkpoint] could not keep the run's id in {path}: {exc}; a relaunch will take this run's memory "
                "snapshots for another run's and restore from storage",
                flush=True,
            )
