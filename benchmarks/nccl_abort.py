"""What NVRx's abort of the process groups costs: the floor of every in-process restart's detection.

On a fault NVRx's monitor thread runs ``AbortTorchDistributed`` (abort every group's backend, then destroy them)
before it raises the restart in the training thread. This times that on a one-rank NCCL group after a few
all-reduces (and a gloo group beside it, as the trainer has), in a fresh process per environment setting, so each
NCCL/torch switch that might shorten it is tried on its own.

Usage::

    python -m benchmarks.nccl_abort --trials 3 --env "" --env NCCL_RAS_ENABLE=0

Prints one line per trial: set-up, the backends' abort, the destroy. With ``--overlap-gib G`` each trial instead
runs NVRx's whole abort (backends, then destroy) on a thread of its own while the main thread copies ``G`` GiB from
pinned host memory to the GPU (a memory-tier restore), then re-creates the group and all-reduces on it: what a
restart gains by not waiting for the abort before its own work.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def _group_in_use() -> object:
    """A one-rank NCCL default group after 5 all-reduces, and a gloo group beside it (as the trainer has); the
    all-reduced tensor."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29911")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    x = torch.ones(1 << 20, device="cuda")
    for _ in range(5):
        dist.all_reduce(x)
    dist.new_group([0], backend="gloo")
    torch.cuda.synchronize()
    return x


def trial_lines(trials: int) -> list[str]:
    """Run ``trials`` set-up/abort cycles in this process (CUDA required)."""
    import torch.distributed as dist
    from nvidia_resiliency_ext.inprocess.abort import AbortTorchDistributed

    lines = []
    for k in range(trials):
        t0 = time.perf_counter()
        _group_in_use()
        t1 = time.perf_counter()
        AbortTorchDistributed.shutdown_all_process_group_backends()
        t2 = time.perf_counter()
        dist.destroy_process_group()
        t3 = time.perf_counter()
        lines.append(f"trial {k}: set-up {t1 - t0:.3f} s; abort backends {t2 - t1:.3f} s; destroy {t3 - t2:.3f} s")
    return lines


def overlap_lines(trials: int, gib: float) -> list[str]:
    """``trials`` cycles of: abort on a thread, ``gib`` GiB host-to-device on the main thread, join, new group."""
    import threading

    import torch
    import torch.distributed as dist
    from nvidia_resiliency_ext.inprocess.abort import AbortTorchDistributed

    n = int(gib * (1 << 30))
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    host.fill_(1)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    dev.copy_(host, non_blocking=True)
    torch.cuda.synchronize()
    lines = []
    for k in range(trials):
        x = _group_in_use()
        done: dict[str, float] = {}

        def abort(done: dict[str, float] = done) -> None:
            AbortTorchDistributed()(None)
            done["abort"] = time.perf_counter()

        t0 = time.perf_counter()
        th = threading.Thread(target=abort, daemon=True)
        th.start()
        dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        th.join()
        t2 = time.perf_counter()
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
        dist.all_reduce(x)
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        dist.destroy_process_group()
        lines.append(
            f"trial {k}: copy {gib:g} GiB {t1 - t0:.3f} s ({n / (t1 - t0) / 1e9:.1f} GB/s) beside the abort; abort "
            f"done at {done['abort'] - t0:.3f} s; joined at {t2 - t0:.3f} s; new group + all-reduce {t3 - t2:.3f} s"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--env", action="append", default=None, help='"NAME=VALUE ..." for one child process (repeat)')
    p.add_argument("--overlap-gib", type=float, default=0.0, help="copy this much host-to-device beside the abort")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        lines = overlap_lines(a.trials, a.overlap_gib) if a.overlap_gib else trial_lines(a.trials)
        print("\n".join(lines), flush=True)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("nccl_abort: no CUDA here; the NCCL abort is what this measures, nothing to do")
        return 2
    for setting in a.env or [""]:
        env = dict(os.environ, **dict(kv.split("=", 1) for kv in setting.split()))
        print(f"== {setting or 'defaults'}", flush=True)
        cmd = [sys.executable, "-m", "benchmarks.nccl_abort", "--child", "--trials", str(a.trials)]
        cmd += ["--overlap-gib", str(a.overlap_gib)] if a.overlap_gib else []
        subprocess.run(cmd, env=env, check=False, timeout=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
