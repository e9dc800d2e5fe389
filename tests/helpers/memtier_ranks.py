"""Two ranks, each its own "node" (its own memory-tier directory), under torchrun: snapshots with peer copies over
gloo, then rank 1's node is replaced (its directory emptied, its process state fresh) and both restore.

``python tests/helpers/memtier_ranks.py OUT_DIR``: rank 0 writes ``OUT_DIR/result.json`` with the restore's fields,
the digest of the state at the snapshot and of the restored state.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers.training_runs import tiny_app_state, tiny_train_step
from training.checkpoint import shm_scope
from training.checkpoint.memtier import MemoryTier
from training.checkpoint.state import state_digest
from training.parallel.distributed import destroy_process_group, init_process_group
from training.telemetry.events import EventLog


def main() -> int:
    out = Path(sys.argv[1])
    rank, world = init_process_group(timeout_s=30)
    os.environ[shm_scope.SCOPE_ENV] = f"node{rank}"  # a /dev/shm of its own per rank, as two pods have
    os.environ[shm_scope.SHM_BASE_ENV] = str(out / "shm")
    (out / "shm").mkdir(parents=True, exist_ok=True)
    events = EventLog(out, rank=rank)
    tier = MemoryTier(out / "ckpt", 5, rank, world, 1, events, collective_timeout_s=20)
    state = tiny_app_state(0)
    digests = {}
    for step in (5, 10):
        while state.step < step:
            tiny_train_step(state)
        tier.snapshot(step, state)
        digests[step] = state_digest(state.model, state.optimizer)
    tier.wait()
    tiny_train_step(state)  # progress after the last snapshot, lost with the node
    tier.close(collective=True)
    if rank == 1:  # the node is replaced: an empty /dev/shm
        shutil.rmtree(shm_scope.scope_dir(out / "ckpt"))
    fresh = tiny_app_state(0)
    tier = MemoryTier(out / "ckpt", 5, rank, world, 1, events, collective_timeout_s=20)
    restored = tier.restore(fresh, at_least=-1)
    got = state_digest(fresh.model, fresh.optimizer)
    if rank == 0:
        result = {"restored": restored, "want": digests[10], "got": got, "step": fresh.step}
        (out / "result.json").write_text(json.dumps(result))
    tier.release()
    tier.close(collective=True)
    destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
