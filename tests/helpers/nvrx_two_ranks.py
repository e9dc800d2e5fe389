"""Test-only entry (two ranks under torchrun): one async save through NVRx's path on CPU tensors, then ``wait()``.

Rank 1's writer is slowed by ``--delay-s`` (the slow-storage fault); ``--wait-s`` bounds how long a rank waits for
the other's write. Each rank writes ``<run_dir>/wait.rank<r>.json``: the error its ``wait()`` raised (or ""), how
long it took and how many agreement collectives it made.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--delay-s", type=float, required=True)
    p.add_argument("--wait-s", type=float, required=True)
    args = p.parse_args()

    import torch.distributed as dist

    from tests.helpers.nvrx_cpu import CpuNvrx
    from tests.helpers.training_runs import tiny_app_state, tiny_train_step
    from training.checkpoint import saves
    from training.checkpoint.errors import CheckpointWriteError
    from training.checkpoint.manager import CheckpointManager
    from training.telemetry.events import EventLog

    rounds = [0]
    all_ok = saves.all_ok

    def counting_all_ok(pg, ok: bool) -> bool:  # the storage saves' agreement collective, counted
        rounds[0] += 1
        return all_ok(pg, ok)

    saves.all_ok = counting_all_ok
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    saves.PEER_WAIT_S = args.wait_s
    mgr = CheckpointManager(
        args.run_dir / "ckpt",
        "async",
        2,
        EventLog(args.run_dir, rank),
        rank,
        2,
        collective_timeout_s=10,
        nvrx=CpuNvrx(),
        write_delay_s=args.delay_s if rank == 1 else 0.0,
    )
    state = tiny_app_state(0)
    tiny_train_step(state)
    nvrx = mgr.io.nvrx
    while nvrx is not None and nvrx.pending():  # the writer's warm-up, as the training loop's polls do
        mgr.maybe_finalize()
        time.sleep(0.1)
    mgr.save(1, state)
    rounds[0] = 0
    t0 = time.monotonic()
    try:
        mgr.wait()
        error = ""
    except CheckpointWriteError as exc:
        error = str(exc)
    out = {"error": error, "wait_s": time.monotonic() - t0, "rounds": rounds[0]}
    (args.run_dir / f"wait.rank{rank}.json").write_text(json.dumps(out))
    mgr.close(collective=False)
    for child in multiprocessing.active_children():  # the writer, NVRx's write-results queue manager
        child.terminate()
        child.join()
    os._exit(0)  # a parked PersistentAsyncCaller's __del__ would wait for its killed worker


if __name__ == "__main__":
    main()
