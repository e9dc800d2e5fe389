"""Start-up phases: launch -> first step, and the same phases again in an in-process restart.

``python -m benchmarks.startup [--nproc N] [--steps 40] [--repeats 1] [--cold] [--out runs/bench-startup]``

One ``training.local`` run (mode ``inprocess-ft``) with ``exception@<steps/2>:<last rank>``. Every worker emits a
``phase`` event per start-up phase (``training.train.PHASES``); the table shows, per phase, the slowest rank's
seconds (the median over repeats) for the first start and for the in-process restart:

- ``launcher``: the launcher's ``launch`` event -> the first worker process started (the launcher's own start, the
  c10d rendezvous, spawning the workers);
- ``imports`` .. ``first_step``: see ``training.train.PHASES``;
- ``total``: ``launch`` -> rank 0's first ``step`` event (first start), or the exception -> the first step after the
  restore (the goodput report's recovery time; includes detection).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from benchmarks.common import fmt, report, run_local, workers
from training.common.arguments import number, parse, port
from training.train import PHASES


def phases(run_dir: Path) -> dict[int, dict[str, float]]:
    """Per in-process iteration of the first launch, each phase's slowest rank, plus ``launcher`` and ``total``."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    launch = next(e["ts"] for e in events if e["event"] == "launch")
    out: dict[int, dict[str, float]] = {}
    for e in events:
        if e["event"] == "phase" and e.get("restart", 0) == 0:
            row = out.setdefault(e["iteration"], {})
            row[e["phase"]] = max(row.get(e["phase"], 0.0), e["s"])
    starts = [e["start_ts"] for e in events if e["event"] == "phase" and e["phase"] == "imports"]
    out[0]["launcher"] = min(starts) - launch
    out[0]["total"] = next(e["ts"] for e in events if e["event"] == "step") - launch
    faults = report(run_dir)["faults"]
    if faults and faults[0]["recovery_s"] is not None and 1 in out:
        out[1]["total"] = faults[0]["recovery_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=number(int, at_least=1), default=None, help="default: GPUs if CUDA, else 2")
    steps_help = "the run's steps; the in-process restart at half of them (at least 2: a step before it)"
    p.add_argument("--steps", type=number(int, at_least=2), default=40, help=steps_help)
    p.add_argument("--repeats", type=number(int, at_least=1), default=1)
    p.add_argument("--port", type=port, default=29800)
    p.add_argument("--out", type=Path, default=Path("runs/bench-startup"))
    p.add_argument("--cold", action="store_true", help="job.prefork_workers off: every worker imports for itself")
    args = parse(p, argv)

    nproc, device = workers(args.nproc)
    runs: list[dict[int, dict[str, float]]] = []
    for rep in range(args.repeats):
        run_dir = args.out / f"run-{rep}"
        faults = f"exception@{args.steps // 2}:{nproc - 1}"
        overrides = {"job": {"prefork_workers": False}} if args.cold else None
        rc, _ = run_local(
            run_dir,
            mode="inprocess-ft",
            steps=args.steps,
            faults=faults,
            nproc=nproc,
            port=args.port,
            overrides=overrides,
        )
        if rc:
            return rc
        runs.append(phases(run_dir))

    def median(iteration: int, phase: str) -> float | None:
        values = [r[iteration][phase] for r in runs if iteration in r and phase in r[iteration]]
        return statistics.median(values) if values else None

    rows: list[dict[str, Any]] = []
    workers_start = "cold workers" if args.cold else "warm workers (job.prefork_workers)"
    print(f"\nStart-up phases, {device}, {workers_start}, slowest rank, median of {args.repeats} run(s)\n")
    print("| phase | first start s | in-process restart s |")
    print("|---|---|---|")
    for phase in ("launcher", *PHASES, "total"):
        first, again = median(0, phase), median(1, phase)
        rows.append({"phase": phase, "first_start_s": first, "inprocess_restart_s": again})
        print(f"| {phase} | {fmt(first)} | {fmt(again)} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"device": device, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
