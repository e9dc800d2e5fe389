"""Test-only entry (two ranks under torchrun): async saves through NVRx's path on CPU tensors, each followed by
``wait()``.

``--round DELAY_S:WAIT_S`` (repeatable, run in order; save ``i`` is step ``i``): rank 1's writer is slowed by DELAY_S
(the slow-storage fault); WAIT_S bounds how long a rank waits for the other's write. For each round each rank writes
``<run_dir>/wait.<i>.rank<r>.json``: the error its ``wait()`` raised (or ""), how long it took and how many agreement
collectives it made. Later rounds reuse the writer the first one warmed.
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
    p.add_argument("--round", dest="rounds", action="append", required=True, metavar="DELAY_S:WAIT_S")
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
    mgr = CheckpointManager(
        args.run_dir / "ckpt",
        "async",
        2,
        EventLog(args.run_dir, rank),
        rank,
        2,
        collective_timeout_s=10,
        nvrx=CpuNvrx(),
    )
    state = tiny_app_state(0)
    tiny_train_step(state)
    nvrx = mgr.io.nvrx
    while nvrx is not None and nvrx.pending():  # the writer's warm-up, as the training loop's polls do
        mgr.maybe_finalize()
        time.sleep(0.1)
    for step, spec in enumerate(args.rounds, start=1):
        delay_s, wait_s = (float(v) for v in spec.split(":"))
        saves.PEER_WAIT_S = wait_s
        mgr.io.delay_s = delay_s if rank == 1 else 0.0  # what write_delay_s sets, read when a write is scheduled
        state.step = step
        mgr.save(step, state)
        rounds[0] = 0
        t0 = time.monotonic()
        try:
            mgr.wait()
            error = ""
        except CheckpointWriteError as exc:
            error = str(exc)
        out = {"error": error, "wait_s": time.monotonic() - t0, "rounds": rounds[0]}
        (args.run_dir / f"wait.{step}.rank{rank}.json").write_text(json.dumps(out))
    mgr.close(collective=False)
    for child in multiprocessing.active_children():  # the writer, NVRx's write-results queue manager
        child.terminate()
        child.join()
    os._exit(0)  # a parked PersistentAsyncCaller's __del__ would wait for its killed worker


if __name__ == "__main__":
    main()
