"""Time to verify a checkpoint at restore: rank 0 alone against every rank hashing its share.

``python -m benchmarks.restore_verify [--gb 1.0] [--nproc N] [--repeats 3] [--out DIR]``

Starts ``--nproc`` workers (default 2) under ``torchrun`` on the host (gloo, no GPU: hashing is host work).
Each writes its part of a ``--gb`` checkpoint with ``dcp.save`` and rank 0 commits it (checksums in
``COMMITTED``). Then, ``--repeats``
times each, the workers verify it the old way (rank 0 hashes every file while the others wait) and the way
:meth:`training.checkpoint.manager.CheckpointManager.load_latest` does now (each rank hashes its share, then one
``all_gather``). Reads are from the page cache after the first pass, so the numbers show the hashing, not the disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

from benchmarks.common import REPO, call_torchrun, torchrun_command
from training.common.arguments import number, parse


def _worker(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemWriter

    from training.checkpoint.files import COMMIT_MARKER, file_checksums, verify_checkpoint
    from training.checkpoint.manager import CheckpointManager
    from training.parallel.distributed import destroy_process_group, init_process_group
    from training.telemetry.events import EventLog

    rank, world = init_process_group(timeout_s=600)
    path = args.out / "step_00000001"
    numel = int(args.gb * 2**30 / 4 / world)
    gen = torch.Generator().manual_seed(rank)
    dcp.save({f"rank{rank}": torch.rand(numel, generator=gen)}, storage_writer=FileSystemWriter(path))
    if rank == 0:
        marker = {"step": 1, "world_size": world, "files": file_checksums(path)}
        (path / COMMIT_MARKER).write_text(json.dumps(marker))
    mgr = CheckpointManager(args.out, "sync", 1, EventLog(args.out, rank), rank, world, collective_timeout_s=600)
    times: dict[str, list[float]] = {"rank 0 alone": [], "shared by all ranks": []}
    for _ in range(args.repeats):
        dist.barrier()
        t0 = time.perf_counter()
        reason = verify_checkpoint(path) if rank == 0 else None
        dist.barrier()
        times["rank 0 alone"].append(time.perf_counter() - t0)
        assert reason is None, reason
        dist.barrier()
        t0 = time.perf_counter()
        reason = mgr.storage.verify_together(mgr.pg, 1, path)
        dist.barrier()
        times["shared by all ranks"].append(time.perf_counter() - t0)
        assert reason is None, reason
    mgr.close()
    if rank == 0:
        (args.out / "times.json").write_text(json.dumps(times))
    destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.restore_verify", description=__doc__.split("\n\n")[0])
    p.add_argument("--gb", type=number(float, above=0), default=1.0, help="checkpoint size in GiB")
    p.add_argument("--nproc", type=number(int, at_least=1), default=2)
    p.add_argument("--repeats", type=number(int, at_least=1), default=3)
    p.add_argument("--out", type=Path, default=Path("runs/bench-restore-verify"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parse(p, argv)
    args.out = args.out.resolve()
    if args.worker:
        return _worker(args)
    nproc = args.nproc
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    worker = ["--worker", "--gb", str(args.gb), "--repeats", str(args.repeats), "--out", str(args.out)]
    cmd, forked = torchrun_command(nproc, "benchmarks.restore_verify", worker)
    print(f"Checkpoint verification at restore, {args.gb:g} GiB, {nproc} ranks (gloo, host only){forked}", flush=True)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    rc = call_torchrun(cmd, {**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": ""})
    if rc:
        print(f"FAILED (exit {rc})", flush=True)
        return rc
    times = json.loads((args.out / "times.json").read_text())
    print("\n| verification | median s | GiB/s | each run, s |\n|---|---|---|---|")
    for name, runs in times.items():
        med = statistics.median(runs)
        print(f"| {name} | {med:.3f} | {args.gb / med:.2f} | {', '.join(f'{t:.3f}' for t in runs)} |")
    shutil.rmtree(args.out / "step_00000001", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
