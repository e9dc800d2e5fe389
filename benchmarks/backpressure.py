"""Back-pressure: checkpoints more often than a write takes, against a run without checkpoints.

``python -m benchmarks.backpressure [--steps 100] [--interval 10] [--write-delay 2.0] [--out DIR]``

Runs :mod:`benchmarks.checkpoint_staging`'s ``none`` and ``async`` variants (one torchrun job each, 2 CPU workers
without CUDA) with every checkpoint write slowed by ``--write-delay`` seconds (``TRAINING_CKPT_WRITE_DELAY_S``, the
slow-storage hook), so that the interval is shorter than the write and every save waits for the previous one. Then
it compares what the goodput report says of the async run with what the two runs measure:

* ``efficiency (report)``: the report's ``checkpoint.efficiency``, steps/s with checkpoints / steps/s without, both
  estimated inside the async run (``docs/goodput.md``);
* ``efficiency (vs none)``: the async run's steps/s over the ``none`` run's, from step ``--warmup`` on (default
  1: the report's step gaps start there too);
* ``back-pressure s``: the report's total wait for previous writes, part of the stall;
* and whether the report warned that the interval is shorter than the write.

With ``--repeats N`` the pair runs N times, interleaved (none, async, none, async, ...), so that a change in the
machine's load hits both variants alike; a row per pair, then the medians. Exits 1 when a variant failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks import checkpoint_staging
from benchmarks.common import fmt, report, step_throughput, workers
from training.common.arguments import choices, number, parse
from training.model.shapes import MODEL_SIZES

VARIANTS = ("none", "async")


def measure(out: Path, warmup: int) -> dict[str, dict[str, Any]]:
    """Per variant of one pair: steps/s and the report's checkpoint figures and warnings."""
    rows: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        run_dir = out / variant
        if (run_dir / "events.jsonl").is_file():
            r = report(run_dir)
            steps_per_s = step_throughput(run_dir, warmup)
            rows[variant] = {"steps_per_s": steps_per_s, **r["checkpoint"], "warnings": r["warnings"]}
    return rows


def compare(rows: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The async run of a pair against its none run; None when one is missing."""
    none, run = rows.get("none"), rows.get("async")
    if not none or not run or not none["steps_per_s"] or not run["steps_per_s"]:
        return None
    measured, reported = run["steps_per_s"] / none["steps_per_s"], run["efficiency"]
    return {
        "none_steps_per_s": none["steps_per_s"],
        "async_steps_per_s": run["steps_per_s"],
        "efficiency_vs_none": measured,
        "efficiency_report": reported,
        "difference_points": None if reported is None else 100 * abs(reported - measured),
        "backpressure_s": run["backpressure_s"],
        "stall_s_mean": run["stall_s_mean"],
        "write_s_mean": run["write_s_mean"],
        "interval_s": run["interval_s"],
        "warned": any("shorter than the write time" in w for w in run["warnings"]),
    }


def table(pairs: list[dict[str, Any]], args: argparse.Namespace, device: str) -> str:
    lines = [
        f"Back-pressure, model {args.size}, {device}: {args.steps} steps, a checkpoint every {args.interval}, "
        f"each write slowed by {args.write_delay:g} s; {len(pairs)} interleaved pair(s) of runs",
        "",
        "| pair | none steps/s | async steps/s | efficiency (vs none) | efficiency (report) | difference, points "
        "| back-pressure s | stall mean s | write mean s | interval s | interval < write warned |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [(str(i + 1), p) for i, p in enumerate(pairs)]
    if len(pairs) > 1:
        median = {k: statistics.median(p[k] for p in pairs) for k in pairs[0] if k != "warned"}
        rows.append(("median", {**median, "warned": all(p["warned"] for p in pairs)}))
    for name, p in rows:
        lines.append(
            f"| {name} | {fmt(p['none_steps_per_s'])} | {fmt(p['async_steps_per_s'])} "
            f"| {fmt(p['efficiency_vs_none'], '.1%')} | {fmt(p['efficiency_report'], '.1%')} "
            f"| {fmt(p['difference_points'], '.1f')} | {fmt(p['backpressure_s'])} | {fmt(p['stall_s_mean'], '.3f')} "
            f"| {fmt(p['write_s_mean'], '.3f')} | {fmt(p['interval_s'])} | {'yes' if p['warned'] else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.backpressure", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", **choices(MODEL_SIZES), default="tiny")
    p.add_argument("--steps", type=number(int, at_least=1), default=100)
    p.add_argument("--interval", type=number(int, at_least=1), default=10)
    p.add_argument("--write-delay", type=number(float, at_least=0), default=2.0, help="seconds each write sleeps first")
    p.add_argument("--warmup", type=number(int, at_least=0), default=1, help="steps left out of steps/s")
    p.add_argument("--repeats", type=number(int, at_least=1), default=3, help="interleaved pairs of runs")
    p.add_argument("--out", type=Path, default=Path("runs/bench-backpressure"))
    p.add_argument("--timeout", type=number(float, above=0), default=300, help="seconds one variant may take")
    args = parse(p, argv, checkpoint_staging.run_problems)
    from training.checkpoint.backends import WRITE_DELAY_ENV  # torch: after the command line is known to be good

    root = args.out.resolve()
    nproc, device = workers(None)
    # what benchmarks.checkpoint_staging's launcher reads
    args.variants, args.seq_len, args.micro_batch, args.config = ",".join(VARIANTS), None, None, None
    args.memory_interval = 0  # the memory tier stays off: these variants measure storage saves only
    os.environ[WRITE_DELAY_ENV] = str(args.write_delay)
    failed = False
    pairs = []
    for i in range(args.repeats):
        args.out = root / f"pair{i + 1}"
        args.out.mkdir(parents=True, exist_ok=True)
        for variant in VARIANTS:
            failed |= checkpoint_staging._launch(args, variant, nproc) != 0
        pair = compare(measure(args.out, args.warmup))
        failed |= pair is None
        if pair is not None:
            pairs.append(pair)
    print("\n" + table(pairs, args, device), flush=True)
    (root / "results.json").write_text(json.dumps({"device": device, "pairs": pairs}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
