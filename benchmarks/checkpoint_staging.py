"""Checkpoint stall per checkpoint mode, measured inside one training job (no launcher start-up per variant).

``python -m benchmarks.checkpoint_staging [--size 1b] [--steps 30] [--interval 10] [--variants ...] [--out DIR]``

Starts one worker per GPU (2 CPU workers without CUDA) under ``torchrun``, one job per variant. Each worker
runs the project's :class:`~training.trainer.Trainer` (FSDP2, AdamW) for ``--steps`` steps with a checkpoint every
``--interval`` steps, and reads rank 0's event log: the stall each save put on the loop (``ckpt_begin`` to
``ckpt_staged``), the time until it was committed, the loop's steps/s against the ``none`` variant (no
checkpoints), and the mean step time while a background write is in flight against the time while none is.
Variants: ``none``, ``sync``, ``async`` (NVRx with ``checkpoint.nvrx_staging`` from the config on CUDA, torch
``dcp.async_save`` on CPU) and ``async:<staging>`` for each NVRx staging mode (CUDA only). The memory tier is off
in every variant unless it ends in ``+mem`` (``none+mem``: memory snapshots only; ``async+mem``: both), with a
snapshot every ``--memory-interval`` steps (default: the config's, ``auto``); its stall per snapshot and the
interval ``auto`` chose are their own columns.

Each variant's checkpoints are removed once it has run (its event log stays for the table), and the benchmark
refuses to start unless ``--out`` has room for one variant's checkpoints (:func:`space_needed`): a 1B model's are
11.7 GB each, and keeping every variant's filled a 64 GiB disk.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, get_args

from benchmarks.common import REPO, call_torchrun, fmt, report, step_throughput, torchrun_command, workers
from platform_config.schema import CheckpointConfig
from training.common.arguments import Rejected, choices, good, number, parse, problem
from training.model.shapes import MODEL_SIZES
from training.telemetry.events import read_events

#: NVRx's staging modes (``checkpoint.nvrx_staging``): a variant ``async:<staging>`` each.
STAGINGS = get_args(CheckpointConfig.model_fields["nvrx_staging"].annotation)
DEFAULT_VARIANTS = (
    "none,sync,async,async:cuda-ipc,async:cuda-copy,async:cuda-ipc-cached,async:cpu-shm,async:cpu-shm-cached"
)


def _worker(args: argparse.Namespace) -> int:
    """One rank of one variant."""
    import torch

    from platform_config import config_from_dict, load_config
    from platform_config.loader import deep_merge
    from training.parallel.distributed import destroy_process_group, init_process_group
    from training.telemetry.events import EventLog
    from training.trainer import Trainer

    rank, _ = init_process_group(timeout_s=args.timeout)
    variant = args.variants
    base, memory = variant.removesuffix("+mem"), variant.endswith("+mem")
    mode, _, staging = base.partition(":")
    ckpt: dict[str, Any] = {
        "interval_steps": args.steps + 1 if mode == "none" else args.interval,
    }
    if not memory:
        ckpt["memory_interval_steps"] = 0
    elif args.memory_interval is not None:
        ckpt["memory_interval_steps"] = args.memory_interval
    if staging:
        ckpt["nvrx_staging"] = staging
    train: dict[str, Any] = {"eval_interval": 0, "steps": args.steps}
    if args.seq_len:
        train["seq_len"] = args.seq_len
    if args.micro_batch:
        train["micro_batch_size"] = args.micro_batch
    overrides = {"model": {"size": args.size}, "train": train, "checkpoint": ckpt}
    cfg = config_from_dict(deep_merge(load_config(args.config).model_dump(mode="json"), overrides))  # validated
    run_dir = _run_dir(args, variant)
    trainer = Trainer(
        cfg,
        run_dir,
        EventLog(run_dir, rank),
        checkpoint_mode="sync" if mode == "sync" else "async",
        final_checkpoint=mode != "none",
    )
    t0 = time.perf_counter()
    trainer.setup()
    trainer.restore()
    trainer.train()
    trainer.close()
    if rank == 0:
        assert trainer.ckpt is not None
        print(f"   done in {time.perf_counter() - t0:.1f}s, backend {trainer.ckpt.backend}", flush=True)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    destroy_process_group()
    return 0


def _run_dir(args: argparse.Namespace, variant: str) -> Path:
    return args.out / variant.replace(":", "-")


#: Checkpoint bytes per parameter: fp32 weights plus AdamW's two fp32 moments.
CHECKPOINT_BYTES_PER_PARAM = 12


def space_needed(size: str, keep_last: int) -> int:
    """Bytes one variant's checkpoints take at most: ``keep_last`` committed plus one being written (the model the
    trainer builds: the named size with the data's tokenizer)."""
    from training.data.dataset import TOKENIZER
    from training.model.shapes import param_count

    return param_count(MODEL_SIZES[size], TOKENIZER.vocab_size) * CHECKPOINT_BYTES_PER_PARAM * (keep_last + 1)


def free_space_error(out: Path, needed: int) -> str | None:
    """Why ``out`` cannot hold ``needed`` bytes (its file system's free space), or None."""
    from training.checkpoint.storage import human_bytes

    free = shutil.disk_usage(out).free
    if free >= needed:
        return None
    return (
        f"{out} has {human_bytes(free)} free, one variant's checkpoints need about {human_bytes(needed)} "
        f"(checkpoint.keep_last + 1 in flight, {CHECKPOINT_BYTES_PER_PARAM} bytes per parameter): "
        "free space there or pass --out on a larger file system"
    )


def _launch(args: argparse.Namespace, variant: str, nproc: int) -> int:
    """torchrun the workers of one variant (bounded by ``--timeout``); returns the exit code (124: timed out)."""
    worker = ["--worker", "--variants", variant, "--out", str(args.out)]
    worker += ["--size", args.size, "--steps", str(args.steps), "--interval", str(args.interval)]
    worker += ["--timeout", str(args.timeout)]
    if args.memory_interval is not None:
        worker += ["--memory-interval", str(args.memory_interval)]
    for flag, value in (("--seq-len", args.seq_len), ("--micro-batch", args.micro_batch), ("--config", args.config)):
        if value:
            worker += [flag, str(value)]
    cmd, forked = torchrun_command(nproc, "benchmarks.checkpoint_staging", worker)
    print(f"-- {variant}: {args.steps} steps, checkpoint every {args.interval}{forked}", flush=True)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    shutil.rmtree(_run_dir(args, variant), ignore_errors=True)
    try:
        rc = call_torchrun(cmd, {**os.environ, "PYTHONPATH": path}, timeout_s=args.timeout)
    except subprocess.TimeoutExpired:
        rc = 124
    shutil.rmtree(_run_dir(args, variant) / "checkpoints", ignore_errors=True)  # the next variant needs the space
    if rc:
        print(f"   FAILED (exit {rc})", flush=True)
    return rc


#: The step-time series in results.json: the mean of each block of this many steps (where a slowdown sits).
BLOCK_STEPS = 25


def step_time_split(events: list[dict[str, Any]], warmup: int) -> dict[str, float | int | None]:
    """Rank 0's mean step time while an async write is in flight and while none is.

    A write is in flight from ``ckpt_staged`` to ``ckpt_committed`` of the same step. Step gaps (consecutive steps
    after ``warmup``) that contain a ``ckpt_begin`` are the save's own stall and are left out of both means; a
    gap overlapping a write window counts as "writing", any other as "idle".
    """
    ev = [e for e in events if e.get("rank", 0) == 0]
    begins = [e["ts"] for e in ev if e["event"] == "ckpt_begin"]
    staged: dict[int, float] = {}
    windows: list[tuple[float, float]] = []
    for e in ev:
        if e["event"] == "ckpt_staged":
            staged[e["step"]] = e["ts"]
        elif e["event"] == "ckpt_committed" and e["step"] in staged:
            windows.append((staged.pop(e["step"]), e["ts"]))
    steps = [(e["ts"], e["step"]) for e in ev if e["event"] == "step" and e["step"] > warmup]
    idle: list[float] = []
    writing: list[float] = []
    blocks: dict[int, list[float]] = {}
    for (t0, s0), (t1, s1) in itertools.pairwise(steps):
        if s1 != s0 + 1 or any(t0 < b <= t1 for b in begins):
            continue
        (writing if any(t0 < end and t1 > start for start, end in windows) else idle).append(t1 - t0)
        blocks.setdefault(s1 // BLOCK_STEPS, []).append(t1 - t0)
    return {
        "step_s_blocks": [round(statistics.fmean(blocks[k]), 4) for k in sorted(blocks)],
        "step_s_idle": statistics.fmean(idle) if idle else None,
        "step_s_writing": statistics.fmean(writing) if writing else None,
        "steps_idle": len(idle),
        "steps_writing": len(writing),
    }


def _table(args: argparse.Namespace, device: str, nproc: int) -> int:
    """Rank-0 event logs of every variant -> a markdown table and results.json."""
    results: dict[str, dict[str, Any]] = {}
    for variant in args.variants.split(","):
        run_dir = _run_dir(args, variant)
        if not (run_dir / "events.jsonl").exists():
            continue
        ck = report(run_dir).get("checkpoint") or {}
        events = read_events(run_dir)
        staged = [e for e in events if e["event"] == "ckpt_staged"]
        stalls = [e["stall_s"] for e in staged]
        mem = [e["stall_s"] for e in events if e["event"] == "mem_snapshot" and e["rank"] == 0 and "error" not in e]
        chosen = [e["interval"] for e in events if e["event"] == "mem_interval" and e["rank"] == 0]
        split = step_time_split(events, args.warmup)
        results[variant] = {
            "steps_per_s": step_throughput(run_dir, args.warmup),
            "stalls_s": stalls,
            # where each save's stall went (NVRx: plan_s, handoff_s, and with cuda-copy gpu_copy_s)
            "stall_parts_s": [{k: v for k, v in e.items() if k.endswith("_s") and k != "stall_s"} for e in staged],
            "mem_snapshots": len(mem),
            "mem_stall_s_p50": statistics.median(mem) if mem else None,
            "mem_interval": chosen[-1] if chosen else None,
            **split,
            **ck,
        }
    base = results.get("none", {}).get("steps_per_s")
    print(f"\nCheckpoint stall by mode, model {args.size}, {device}, {args.steps} steps, every {args.interval}\n")
    print(
        "| variant | steps/s | efficiency vs none | saves | stall p50 s | commit p50 s | stall of each save, s "
        "| step s idle | step s while writing | memory snapshots | memory stall p50 s | memory interval |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        eff = r["steps_per_s"] / base if base and r["steps_per_s"] else None
        r["efficiency_vs_none"] = eff
        each = ", ".join(f"{x:.2f}" for x in r["stalls_s"]) or "-"
        print(
            f"| {name} | {fmt(r['steps_per_s'])} | {fmt(eff, '.1%')} | {r.get('saves', 0)} "
            f"| {fmt(r.get('stall_s_p50'), '.3f')} | {fmt(r.get('write_s_p50'), '.3f')} | {each} "
            f"| {fmt(r['step_s_idle'], '.4f')} | {fmt(r['step_s_writing'], '.4f')} "
            f"| {r['mem_snapshots']} | {fmt(r['mem_stall_s_p50'], '.4f')} | {r['mem_interval'] or '-'} |"
        )
    recorded = {"device": device, "world_size": nproc, "results": results}
    (args.out / "results.json").write_text(json.dumps(recorded, indent=2))
    cuda = "CPU" not in device
    missing = [v for v in args.variants.split(",") if v not in results and (cuda or ":" not in v)]
    if missing:
        print(f"no results for: {', '.join(missing)}", flush=True)
    return 1 if missing else 0


def _memory_interval(text: str) -> int | str | Rejected:
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        return Rejected(text, "a whole number of steps >= 1, or auto")
    return int(text)


def variant_problem(variant: str) -> str | None:
    """Why ``variant`` is none of ``none``, ``sync``, ``async``, ``async:<NVRx staging>``, each with an optional
    ``+mem``, or None."""
    mode, colon, staging = variant.removesuffix("+mem").partition(":")
    if mode in ("none", "sync", "async") and (not colon or (mode == "async" and staging in STAGINGS)):
        return None
    allowed = f"none, sync, async or async:STAGING (STAGING one of {', '.join(STAGINGS)}), each with an optional +mem"
    return problem("--variants", allowed, variant)


def problems(args: argparse.Namespace) -> list[str]:
    """Unknown variants, and :func:`run_problems`."""
    lines = [line for v in args.variants.split(",") if (line := variant_problem(v.strip())) is not None]
    return lines + run_problems(args)


def run_problems(args: argparse.Namespace) -> list[str]:
    """Steps that leave nothing to measure: all in the warm-up, or no save within the run."""
    lines = []
    if good(args.steps) and good(args.warmup) and args.warmup >= args.steps:
        lines.append(problem("--warmup", f"fewer steps than --steps {args.steps}", args.warmup))
    if good(args.steps) and good(args.interval) and args.interval > args.steps:
        lines.append(problem("--interval", f"at most --steps {args.steps}: a save within the run", args.interval))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint_staging", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", **choices(MODEL_SIZES), default="tiny", help="model.size")
    p.add_argument("--seq-len", type=number(int, at_least=1), default=None)
    p.add_argument("--micro-batch", type=number(int, at_least=1), default=None)
    p.add_argument("--steps", type=number(int, at_least=1), default=30)
    p.add_argument("--interval", type=number(int, at_least=1), default=10)
    p.add_argument("--warmup", type=number(int, at_least=0), default=3, help="steps left out of steps/s")
    p.add_argument(
        "--memory-interval",
        type=_memory_interval,
        default=None,
        help="steps between snapshots of the +mem variants, or auto (default: checkpoint.memory_interval_steps)",
    )
    p.add_argument("--variants", default=DEFAULT_VARIANTS)
    p.add_argument("--nproc", type=number(int, at_least=1), default=None, help="default: GPUs if CUDA, else 2")
    p.add_argument("--config", type=Path, default=None, help="project config (default: project.yaml)")
    p.add_argument("--out", type=Path, default=Path("runs/bench-staging"))
    p.add_argument("--timeout", type=number(float, above=0), default=300, help="seconds one variant may take")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parse(p, argv, problems)
    args.out = args.out.resolve()
    if args.worker:
        return _worker(args)
    nproc, device = workers(args.nproc)
    args.out.mkdir(parents=True, exist_ok=True)
    from platform_config import load_config

    no_room = free_space_error(args.out, space_needed(args.size, load_config(args.config).checkpoint.keep_last))
    if no_room:
        print(f"Checkpoint staging benchmark: {no_room}", file=sys.stderr, flush=True)
        return 1
    print(f"Checkpoint staging benchmark on {device}", flush=True)
    failed = False
    for variant in args.variants.split(","):
        if ":" in variant and "CPU" in device:
            print(f"-- {variant}: skipped (NVRx staging modes need CUDA)", flush=True)
            continue
        failed |= _launch(args, variant, nproc) != 0
    return _table(args, device, nproc) or int(failed)


if __name__ == "__main__":
    raise SystemExit(main())
