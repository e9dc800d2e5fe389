"""GPU memory and recovery across in-process restarts while the checkpoint writer is busy (issue 14, item 9).

``python -m benchmarks.restart_memory [--size 1b] [--steps 100] [--interval 20] [--faults ...] [--out DIR]``

One ``training.local`` run (mode ``inprocess-ft``) with a storage checkpoint every ``--interval`` steps, short enough
that a write is in flight whenever a fault fires, and the exceptions of ``--faults``. Prints one row per (re)start of
rank 0: the CUDA memory its process held as it (re)entered (the ``start`` event's allocated and reserved MiB), how its
model was built (on the meta device for a restore to fill, or initialised) and in how long, and the restore's tier and
time; then each fault's recovery. Allocated memory that grows by a model-plus-optimizer shard per restart is a leak
(+5575 MiB per restart before the fix, 2 x H200, 2026-12-01: docs/gpu-smoke.md). Without CUDA it runs the tiny model
on CPU workers and says so: there is no device memory to read then.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.common import fmt, report, run_local, schedule_lines, workers
from training.common.arguments import choices, number, parse
from training.model.shapes import MODEL_SIZES
from training.telemetry.events import read_events

#: Local in-process timeouts for the 1B model (before the CUDA scale: x8): its set-up takes ~10 s and a step with a
#: write in flight up to ~3 s, past the tiny model's 4 s soft timeout and 3 s gloo deadline.
LOCAL_1B = {
    "cuda_timeout_scale": 8,
    "inprocess": {
        "soft_timeout_s": 5, "hard_timeout_s": 8, "heartbeat_interval_s": 1, "heartbeat_timeout_s": 6,
        "barrier_timeout_s": 20, "completion_timeout_s": 20, "gloo_timeout_s": 7.5, "monitor_thread_interval_s": 0.5,
        "monitor_process_interval_s": 0.05, "progress_watchdog_interval_s": 0.5, "step_timeout_floor_s": 4.9,
        "last_call_wait_s": 0.1, "termination_grace_s": 2,
    },
}  # fmt: skip


def overrides(size: str, interval: int) -> dict[str, Any]:
    """Config overrides of the run: the model, a checkpoint every ``interval`` steps, and (1B) fitting timeouts."""
    out: dict[str, Any] = {"model": {"size": size}, "checkpoint": {"interval_steps": interval}}
    if size != "tiny":
        out["train"] = {"seq_len": 2048, "micro_batch_size": 4}
        out["local"] = LOCAL_1B
    return out


def restarts(events: list[dict[str, Any]], rank: int = 0) -> list[dict[str, Any]]:
    """One row per (re)start of ``rank``: iteration, CUDA MiB allocated / reserved at the start, the model build
    (seconds, on meta or not), the restore's tier and seconds (None where the run did not say)."""
    rows: list[dict[str, Any]] = []
    for e in events:
        if e.get("rank") != rank:
            continue
        event = e.get("event")
        if event == "start":
            rows.append(
                {
                    "iteration": e.get("iteration"),
                    "allocated_mib": e.get("cuda_allocated_mb"),
                    "reserved_mib": e.get("cuda_reserved_mb"),
                    "model_s": None, "meta": None, "tier": None, "restore_s": None,
                }
            )  # fmt: skip
        elif not rows:
            continue
        elif event == "phase" and e.get("phase") == "model":
            rows[-1].update(model_s=e.get("s"), meta=e.get("meta"))
        elif event == "phase" and e.get("phase") == "restore":
            rows[-1]["restore_s"] = e.get("s")
        elif event == "restore" and rows[-1]["tier"] is None:
            rows[-1]["tier"] = e.get("tier")
    return rows


def problems(args: argparse.Namespace) -> list[str]:
    """``--faults`` against the run: each fault within ``--steps``, on a rank below ``--nproc``."""
    return schedule_lines("--faults", args.faults, args.steps, args.nproc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.restart_memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--size", **choices(MODEL_SIZES), default=None, help="default: 1b with CUDA, tiny without")
    p.add_argument("--steps", type=number(int, at_least=1), default=100)
    p.add_argument("--interval", type=number(int, at_least=1), default=20, help="steps between storage checkpoints")
    p.add_argument("--faults", default="exception@25:0,exception@50:1,exception@75:0")
    p.add_argument("--nproc", type=number(int, at_least=1), default=None, help="default: GPUs if CUDA, else 2")
    p.add_argument("--timeout", type=number(float, above=0), default=300, help="seconds for the whole run")
    p.add_argument("--out", type=Path, default=Path("runs/bench-restart-memory"))
    args = parse(p, argv, problems)
    import torch

    nproc, device = workers(args.nproc)
    size = args.size or ("1b" if torch.cuda.is_available() else "tiny")
    if not torch.cuda.is_available():
        print("no CUDA: the CPU fallback (tiny model, gloo); the memory columns stay empty", flush=True)
    run_dir = args.out / "run"
    rc, log = run_local(
        run_dir, mode="inprocess-ft", steps=args.steps, faults=args.faults, nproc=nproc,
        overrides=overrides(size, args.interval), timeout_s=args.timeout,
    )  # fmt: skip
    if not (run_dir / "events.jsonl").exists():
        print(f"no events: the run failed to start (exit {rc}); see {log}")
        return 1
    rows = restarts(read_events(run_dir))
    print(f"\nIn-process restarts with a busy writer, model {size}, {device}, a save every {args.interval} steps\n")
    print("| start | allocated MiB | reserved MiB | model s | on meta | restore tier | restore s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['iteration']} | {fmt(r['allocated_mib'], '.1f')} | {fmt(r['reserved_mib'], '.1f')} | "
            f"{fmt(r['model_s'])} | {'-' if r['meta'] is None else r['meta']} | {r['tier'] or '-'} | "
            f"{fmt(r['restore_s'])} |"
        )
    faults = [f for f in report(run_dir)["faults"] if f.get("injected")]
    print("\n| fault | step | layer | recovery s |\n|---|---|---|---|")
    for f in faults:
        print(f"| {f['kind']} | {f['step']} | {f['layer']} | {fmt(f.get('recovery_s'))} |")
    summary = run_dir / "summary.json"
    final = json.loads(summary.read_text()).get("final_step") if summary.exists() else None
    print(f"\nexit {rc}, final step {final} of {args.steps}")
    (args.out / "results.json").write_text(json.dumps({"device": device, "size": size, "restarts": rows}, indent=1))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
