"""Two ranks, each its own "node", under torchrun, with the memory tier of a :class:`CheckpointManager` on a
checkpoint group whose deadline (2 s) is shorter than the ranks' skew in the restore (4 s):

1. a start on which only rank 1 was told ``--fresh`` (rank 0's word holds, on every rank), then snapshots at steps
   5, 10, 15 with peer copies; rank 1's exchange at step 10 fails (a blip: it never answers, so
   rank 0's ends at gloo's deadline); the ranks try again on a new group at step 15;
2. rank 1's node is replaced (its directory emptied) and both restore; rank 1 reads and verifies its copy
   :data:`SKEW_S` later than rank 0.

``python tests/helpers/memtier_blip_ranks.py OUT_DIR``: each rank writes ``OUT_DIR/result.rank<r>.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers.training_runs import tiny_app_state, tiny_train_step
from training.checkpoint import replica, shm_scope
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.snapshot_copy import SnapshotCopier
from training.checkpoint.state import state_digest
from training.parallel.distributed import destroy_process_group, init_process_group
from training.telemetry.events import EventLog, read_events

#: The checkpoint group's deadline (gloo's, of the memory tier's group too), and rank 1's lateness in the restore.
DEADLINE_S, SKEW_S, LONG_S = 2.0, 4.0, 30.0


def _manager(out: Path, rank: int, world: int) -> CheckpointManager:
    return CheckpointManager(
        out / "ckpt", "sync", 3, EventLog(out, rank=rank), rank, world, collective_timeout_s=DEADLINE_S,
        bulk_timeout_s=LONG_S, memory_interval_steps=5, per_node=1,
    )  # fmt: skip


def _blip_on_second_exchange() -> None:
    real, calls = replica.exchange, []

    def exchange(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("injected blip: this rank's exchange of the snapshot of step 10 never ran")
        return real(*args, **kwargs)

    replica.exchange = exchange


def _late_verification() -> None:
    real = SnapshotCopier.verify

    def verify(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(SKEW_S)
        return real(self, *args, **kwargs)

    SnapshotCopier.verify = verify  # type: ignore[method-assign]


def main() -> int:
    out = Path(sys.argv[1])
    rank, world = init_process_group(timeout_s=60)
    os.environ[shm_scope.SCOPE_ENV] = f"node{rank}"  # a /dev/shm of its own per rank, as two pods have
    os.environ[shm_scope.SHM_BASE_ENV] = str(out / "shm")
    (out / "shm").mkdir(parents=True, exist_ok=True)
    result: dict = {}
    try:
        mgr = _manager(out, rank, world)
        state = tiny_app_state(0)
        mgr.load_latest(state, allow_fresh_start=rank == 1)  # the ranks disagree on --fresh: rank 0's holds
        if rank == 1:
            _blip_on_second_exchange()
        digests = {}
        for step in (5, 10, 15):
            while state.step < step:
                tiny_train_step(state)
            mgr.snapshot(step, state)
            digests[step] = state_digest(state.model, state.optimizer)
        mgr.memory.wait()
        mgr.close(collective=False)  # the run goes on no further: its slots stay
        if rank == 1:  # the node is replaced: an empty /dev/shm, and a slower reader
            shutil.rmtree(shm_scope.scope_dir(out / "ckpt"))
            _late_verification()
        fresh = tiny_app_state(0)
        loader = _manager(out, rank, world)
        result["restored"] = loader.load_latest(fresh)
        result["same_state"] = state_digest(fresh.model, fresh.optimizer) == digests[15]
        loader.close(collective=False)
    except BaseException as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    if rank == 0:
        result["events"] = [
            {k: e.get(k) for k in ("event", "step", "replicated", "from_step", "tier", "per_rank_tier")}
            for e in read_events(out)
            if e["event"] in ("mem_snapshot", "restore") and "error" not in e
        ]
    (out / f"result.rank{rank}.json").write_text(json.dumps(result))
    destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
