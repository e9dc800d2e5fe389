"""Back-pressure: checkpoints more often than a write takes, against a run without checkpoints.

``python -m benchmarks.backpressure [--steps 80] [--interval 5] [--write-delay 1.0] [--out DIR]``

Runs :mod:`benchmarks.checkpoint_staging`'s ``none`` and ``async`` variants (one torchrun job each, 2 CPU workers
without CUDA) with every checkpoint write slowed by ``--write-delay`` seconds (``TRAINING_CKPT_WRITE_DELAY_S``, the
slow-storage hook), so that the interval is shorter than the write and every save waits for the previous one. Then
it compares what the goodput report says of the async run with what the two runs measure:

* ``efficiency (report)``: the report's ``checkpoint.efficiency``, steps/s with checkpoints / steps/s without, both
  estimated inside the async run (``docs/goodput.md``);
* ``efficiency (vs none)``: the async run's steps/s over the ``none`` run's (steps after ``--warmup``);
* ``back-pressure s``: the report's total wait for previous writes, part of the stall;
* and whether the report warned that the interval is shorter than the write.

Exits 1 when a variant failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks import checkpoint_staging
from benchmarks.common import fmt, report, step_throughput, workers
from training.checkpoint.manager import WRITE_DELAY_ENV

VARIANTS = ("none", "async")


def measure(out: Path, warmup: int) -> dict[str, dict[str, Any]]:
    """Per variant: steps/s and the report's checkpoint figures and warnings."""
    rows: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        run_dir = out / variant
        if (run_dir / "events.jsonl").is_file():
            r = report(run_dir)
            rows[variant] = {
                "steps_per_s": step_throughput(run_dir, warmup),
                **r["checkpoint"],
                "warnings": r["warnings"],
            }
    return rows


def table(rows: dict[str, dict[str, Any]], args: argparse.Namespace, device: str) -> str:
    base = rows.get("none", {}).get("steps_per_s")
    lines = [
        f"Back-pressure, model {args.size}, {device}: {args.steps} steps, a checkpoint every {args.interval}, "
        f"each write slowed by {args.write_delay:g} s",
        "",
        "| variant | steps/s | efficiency (vs none) | efficiency (report) | difference, points | back-pressure s "
        "| stall mean s | write mean s | interval s | interval < write warned |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        measured = r["steps_per_s"] / base if base and r["steps_per_s"] else None
        r["efficiency_vs_none"] = measured
        reported = r["efficiency"] if name != "none" else None
        diff = 100 * abs(reported - measured) if reported is not None and measured is not None else None
        r["difference_points"] = diff
        warned = any("shorter than the write time" in w for w in r["warnings"])
        lines.append(
            f"| {name} | {fmt(r['steps_per_s'])} | {fmt(measured, '.1%')} | {fmt(reported, '.1%')} "
            f"| {fmt(diff, '.1f')} "
            f"| {fmt(r['backpressure_s'])} | {fmt(r['stall_s_mean'], '.3f')} | {fmt(r['write_s_mean'], '.3f')} "
            f"| {fmt(r['interval_s'])} | {'yes' if warned else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="tiny")
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--interval", type=int, default=5)
    p.add_argument("--write-delay", type=float, default=1.0, help="seconds each checkpoint write sleeps first")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of steps/s")
    p.add_argument("--out", type=Path, default=Path("runs/bench-backpressure"))
    p.add_argument("--timeout", type=float, default=300, help="seconds one variant may take")
    args = p.parse_args(argv)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    nproc, device = workers(None)
    # what benchmarks.checkpoint_staging's launcher reads
    args.variants, args.seq_len, args.micro_batch, args.config = ",".join(VARIANTS), None, None, None
    os.environ[WRITE_DELAY_ENV] = str(args.write_delay)
    failed = False
    for variant in VARIANTS:
        failed |= checkpoint_staging._launch(args, variant, nproc) != 0
    rows = measure(args.out, args.warmup)
    print("\n" + table(rows, args, device), flush=True)
    return 1 if failed or set(rows) != set(VARIANTS) else 0


if __name__ == "__main__":
    sys.exit(main())
