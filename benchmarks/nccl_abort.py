"""What NVRx's abort of the process groups costs: the floor of every in-process restart's detection.

On a fault NVRx's monitor thread runs ``AbortTorchDistributed`` (abort every group's backend, then destroy them)
before it raises the restart in the training thread. This times that on a one-rank NCCL group after a few
all-reduces (and a gloo group beside it, as the trainer has), in a fresh process per environment setting, so each
NCCL/torch switch that might shorten it is tried on its own.

Usage::

    python -m benchmarks.nccl_abort --trials 3 --env "" --env NCCL_RAS_ENABLE=0
    python -m benchmarks.nccl_abort --trials 3 --detach

Prints one line per trial: set-up, the backends' abort, the destroy. With ``--overlap-gib G`` each trial instead
runs NVRx's whole abort (backends, then destroy) on a thread of its own while the main thread copies ``G`` GiB from
pinned host memory to the GPU (a memory-tier restore), then re-creates the group and all-reduces on it: what a
restart gains by not waiting for the abort before its own work. With ``--detach`` each trial takes the groups out of
torch's registry (``training.parallel.detached_groups``, what ``inprocess.abort: detached`` does on a fault), aborts
them on a thread and meanwhile creates the next default group and all-reduces on it; then times the same new group
with no abort beside it: whether NCCL lets a new communicator start while an old one is being aborted, and at what
cost.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable


def _group_in_use(store: object = None) -> object:
    """A one-rank NCCL default group after 5 all-reduces, and a gloo group beside it (as the trainer has); the
    all-reduced tensor. On ``store`` (a prefix of its own per group, as the trainer's iterations) when given, else
    ``env://``."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29911")
    kwargs = {"store": store} if store is not None else {}
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"), **kwargs)
    x = torch.ones(1 << 20, device="cuda")
    for _ in range(5):
        dist.all_reduce(x)
    dist.new_group([0], backend="gloo")
    torch.cuda.synchronize()
    return x


def _on_thread(abort: Callable[[], object]) -> tuple[threading.Thread, dict[str, float]]:
    """``abort`` started on a thread; the dict gets its end time under ``"abort"``."""
    done: dict[str, float] = {}

    def run() -> None:
        abort()
        done["abort"] = time.perf_counter()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, done


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
        t0 = time.perf_counter()
        th, done = _on_thread(lambda: AbortTorchDistributed()(None))
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


def detach_lines(trials: int) -> list[str]:
    """``trials`` cycles of: detach the groups, abort them on a thread, meanwhile a new group and an all-reduce; then
    the same new group alone."""
    import torch
    import torch.distributed as dist

    from training.parallel import detached_groups

    base = dist.TCPStore("127.0.0.1", 29912, 1, is_master=True, wait_for_workers=False)
    names = iter(range(1 << 30))

    def store() -> dist.PrefixStore:
        """A prefix of its own for each group: the detached group's keys are still in the store."""
        return dist.PrefixStore(f"group{next(names)}", base)

    def new_group(x: torch.Tensor) -> float:
        t0 = time.perf_counter()
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"), store=store())
        dist.all_reduce(x)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    lines = []
    for k in range(trials):
        x = _group_in_use(store())
        t0 = time.perf_counter()
        detached = detached_groups.detach()
        t_detach = time.perf_counter() - t0
        th, done = _on_thread(lambda detached=detached: detached_groups.abort(detached))
        beside = new_group(x)
        th.join()
        dist.destroy_process_group()
        alone = new_group(x)
        dist.destroy_process_group()
        lines.append(
            f"trial {k}: detach {t_detach * 1e3:.2f} ms; new group + all-reduce beside the abort {beside:.3f} s, alone "
            f"{alone:.3f} s; abort done at {done['abort'] - t0:.3f} s"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--env", action="append", default=None, help='"NAME=VALUE ..." for one child process (repeat)')
    p.add_argument("--overlap-gib", type=float, default=0.0, help="copy this much host-to-device beside the abort")
    p.add_argument("--detach", action="store_true", help="detach the groups, abort them beside a new group")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        if a.detach:
            lines = detach_lines(a.trials)
        else:
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
        cmd += ["--detach"] if a.detach else []
        subprocess.run(cmd, env=env, check=False, timeout=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
