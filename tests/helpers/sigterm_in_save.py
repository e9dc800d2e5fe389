"""Test-only entry (two ranks under torchrun): rank 1 is sent SIGTERM while it writes a synchronous (DCP) save.

Both ranks install the worker's SIGTERM handler and start a save whose writes are slowed by the storage hook
(``TRAINING_CKPT_WRITE_DELAY_S``); rank 1 signals itself once its main thread is inside DCP's ``write_data``. DCP
gathers every rank's error onto every rank. Each rank writes ``<run_dir>/rank<R>.json``: the type of the error its
save raised, the cause the exit codes give it, and its message; then both exit 0 (so torchrun stops neither).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch.distributed as dist

from platform_config import config_from_dict
from tests.helpers.training_runs import FAST_CONFIG
from training.checkpoint.backends import WRITE_DELAY_ENV
from training.resilience import sigterm
from training.resilience.exit_codes import classify
from training.telemetry.events import EventLog
from training.trainer import Trainer

#: Each rank's write sleeps this long first: the window in which rank 1 is signalled.
WRITE_DELAY_S = 3.0
#: A rank gives up waiting for the other's result after this long (the test's own bound).
PEER_WAIT_S = 60.0


def sigterm_in_save(run_dir: Path) -> dict[int, dict[str, Any]]:
    """Run this script on two ranks under torchrun; each rank's outcome."""
    from tests.helpers.training_runs import child_env, torchrun

    run_dir.mkdir(parents=True, exist_ok=True)
    env = {**child_env(), WRITE_DELAY_ENV: str(WRITE_DELAY_S)}
    torchrun([__file__, "--run-dir", run_dir], nproc=2, timeout_s=150, env=env)
    return {r: json.loads((run_dir / f"rank{r}.json").read_text()) for r in (0, 1)}


def _signal_inside_write() -> None:
    """SIGTERM to this process once the main thread is inside DCP's ``write_data`` (the slowed write)."""
    main = threading.main_thread().ident
    deadline = time.monotonic() + PEER_WAIT_S
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(main)
        while frame is not None:
            if frame.f_code.co_name == "write_data":
                os.kill(os.getpid(), signal.SIGTERM)
                return
            frame = frame.f_back
        time.sleep(0.01)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", type=Path, required=True)
    args = p.parse_args()
    cfg = config_from_dict(FAST_CONFIG)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    # The main thread takes the signal in the slowed write's sleep; on a loaded 2-core machine it once waited longer
    # than the default 1 s grace for a CPU, and the watcher ended rank 1 before its handler ran (a suite on a busy
    # machine, 2026-12-03): the grace is not what this test is about.
    sigterm.install(grace_s=15.0)
    trainer = Trainer(cfg, args.run_dir, EventLog(args.run_dir, rank), checkpoint_mode="sync", target_steps=1)
    trainer.setup()
    if rank == 1:
        threading.Thread(target=_signal_inside_write, daemon=True).start()
    out: dict[str, Any] = {"error_type": None, "cause": None, "message": ""}
    try:
        trainer.save_checkpoint()
    except BaseException as exc:
        out = {"error_type": type(exc).__name__, "cause": classify(exc), "message": str(exc)[:1000]}
    part = args.run_dir / f"rank{rank}.part"
    part.write_text(json.dumps(out))
    part.rename(args.run_dir / f"rank{rank}.json")
    other = args.run_dir / f"rank{1 - rank}.json"
    deadline = time.monotonic() + PEER_WAIT_S
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
