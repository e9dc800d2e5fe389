"""Test-only entry (two ranks under torchrun): rank 0 restores while rank 1 never joins the checkpoint collective.

The default group is gloo with the timeout it gets on CUDA (``barrier_timeout_s``, for NCCL, above the in-process
hard timeout), the timeouts are the local ones (``cfg.local.inprocess``). Rank 0 writes ``<run_dir>/blocked.json``:
the error its restore ended with, after how long, and the deadlines involved; rank 1 waits for that file, then exits.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch.distributed as dist

from platform_config import config_from_dict
from tests.helpers.training_runs import FAST_CONFIG
from training.parallel.distributed import checkpoint_timeout_s
from training.telemetry.events import EventLog
from training.trainer import Trainer

RESULT = "blocked.json"
#: Rank 1 gives up waiting for rank 0's result after this long (the test's own bound).
RANK1_WAIT_S = 120.0


def blocked_restore(run_dir: Path) -> dict[str, Any]:
    """Run this script on two ranks under torchrun; rank 0's outcome (``blocked.json``)."""
    from tests.helpers.training_runs import torchrun

    run_dir.mkdir(parents=True, exist_ok=True)
    torchrun([__file__, "--run-dir", run_dir], nproc=2, timeout_s=150)
    return json.loads((run_dir / RESULT).read_text())


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", type=Path, required=True)
    args = p.parse_args()
    base = config_from_dict(FAST_CONFIG)
    ip = base.local.inprocess
    cfg = base.model_copy(update={"inprocess": ip})
    default_s = ip.barrier_timeout_s  # what training.train gives an NCCL default group
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=default_s))
    rank = dist.get_rank()
    trainer = Trainer(cfg, args.run_dir, EventLog(args.run_dir, rank), checkpoint_mode="sync", target_steps=1)
    trainer.setup()
    result = args.run_dir / RESULT
    if rank == 1:  # a peer stuck elsewhere (a hang, a dead writer): it never enters the restore's collectives
        deadline = time.monotonic() + RANK1_WAIT_S
        while not result.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        os._exit(0)
    t0 = time.monotonic()
    try:
        trainer.restore()
        error = ""
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
    out = {
        "error": error[:1000],
        "left_after_s": round(time.monotonic() - t0, 2),
        "checkpoint_deadline_s": checkpoint_timeout_s(cfg.inprocess),
        "hard_timeout_s": ip.hard_timeout_s,
        "default_group_timeout_s": default_s,
    }
    part = result.with_suffix(".part")
    part.write_text(json.dumps(out))
    part.rename(result)
    os._exit(0)


if __name__ == "__main__":
    main()
