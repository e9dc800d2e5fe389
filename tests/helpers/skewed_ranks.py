"""Two ranks under torchrun whose checkpoint I/O ends seconds apart (rank 1's file system client is slower), on a
checkpoint group whose deadline is shorter than that skew: a sync save, then a restore whose verification and
``dcp.load`` reads are slower on rank 1; then a skew longer than the long deadline.

``python tests/helpers/skewed_ranks.py OUT_DIR``: each rank writes ``OUT_DIR/result.rank<r>.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from torch.distributed.checkpoint import FileSystemReader

from tests.helpers.training_runs import tiny_app_state, tiny_train_step
from training.checkpoint import files
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.state import state_digest
from training.parallel.distributed import destroy_process_group, init_process_group
from training.resilience.exit_codes import classify
from training.telemetry.events import EventLog

#: The checkpoint group's deadline, the skew of rank 1's I/O, and the long deadline the bulk I/O waits with.
DEADLINE_S, SKEW_S, LONG_S = 2.0, 4.0, 30.0
#: The last round: a skew past a long deadline of this many seconds.
SHORT_LONG_S = 3.0


def _slow(rank: int) -> None:
    """Rank 1's reads of checkpoint data (verification hashes, ``dcp.load``) take :data:`SKEW_S` longer."""
    if rank != 1:
        return
    real_hash, real_read = files.sha256_file, FileSystemReader.read_data

    def slow_hash(path: Path) -> str:
        time.sleep(SKEW_S)
        return real_hash(path)

    def slow_read(self, plan, planner):  # type: ignore[no-untyped-def]
        time.sleep(SKEW_S)
        return real_read(self, plan, planner)

    files.sha256_file = slow_hash
    FileSystemReader.read_data = slow_read


def _manager(out: Path, rank: int, world: int, long_s: float, delay_s: float) -> CheckpointManager:
    return CheckpointManager(
        out / "ckpt", "sync", 3, EventLog(out, rank=rank), rank, world, collective_timeout_s=DEADLINE_S,
        write_delay_s=delay_s, bulk_timeout_s=long_s,
    )  # fmt: skip


def main() -> int:
    out = Path(sys.argv[1])
    rank, world = init_process_group(timeout_s=60)
    result: dict = {"pings": 0}

    def ping() -> None:
        result["pings"] += 1

    state = tiny_app_state(0)
    tiny_train_step(state)
    state.step = 2
    try:
        mgr = _manager(out, rank, world, LONG_S, SKEW_S if rank == 1 else 0.0)
        mgr.keepalive = (ping, LONG_S)
        mgr.save(2, state)  # rank 1's write ends SKEW_S later
        result["saved"] = mgr.latest_committed()
        mgr.close()
        _slow(rank)
        fresh = tiny_app_state(0)
        loader = _manager(out, rank, world, LONG_S, 0.0)
        loader.keepalive = (ping, LONG_S)
        result["restored"] = loader.load_latest(fresh)  # rank 1 verifies and reads SKEW_S later, twice
        result["same_state"] = state_digest(fresh.model, fresh.optimizer) == state_digest(state.model, state.optimizer)
        loader.close()
    except BaseException as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    try:
        past = _manager(out, rank, world, SHORT_LONG_S, 0.0)  # rank 1's verification, 4 s late, past 3 s
        past.keepalive = (ping, SHORT_LONG_S)
        past.load_latest(tiny_app_state(0))
    except BaseException as exc:
        result["past_deadline"] = {"error": f"{type(exc).__name__}: {exc}", "cause": classify(exc)}
    (out / f"result.rank{rank}.json").write_text(json.dumps(result))
    destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
