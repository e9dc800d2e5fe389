"""Recovery-time benchmark: each restart layer against the faults it is meant to catch.

``python -m benchmarks.recovery [--modes inprocess,ft-launcher,k8s-only] [--repeats 1] [--out runs/bench-recovery]``

Runs ``training.local`` once per mode (and repeat) with a fault schedule aimed at that mode's layer, then
prints, per mode and recovering layer, the recovery time (fault -> first new step after restore; see
docs/goodput.md) p50/p95/max and the run's training and infrastructure goodput. On a machine with CUDA the
workers use NCCL (one GPU each); elsewhere this is the CPU fallback (gloo, fp32), and the table says so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import fmt, report, run_local, schedule_lines, workers
from training.common.arguments import good, listed, number, one_of, parse
from training.telemetry.analysis import summary_stats

#: Faults per mode: what that mode's layer is meant to recover from (``kind@step:rank``).
SCHEDULES = {
    "inprocess": "exception@30:1,hang@60:0,comm@90:1",
    "ft-launcher": "sigkill@30:1,sigkill@60:0,exception@90:1",
    "inprocess-ft": "exception@30:1,hang@60:0,sigkill@90:1",
    "k8s-only": "exception@30:1,sigkill@60:0",
}


def problems(args: argparse.Namespace) -> list[str]:
    """The modes' fault schedules against the run: every fault within ``--steps``, on a rank below ``--nproc``."""
    modes = args.modes if good(args.modes) else []
    return [line for m in modes for line in schedule_lines(f"{m}'s fault", SCHEDULES[m], args.steps, args.nproc)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.recovery", description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", type=listed(one_of(SCHEDULES)), default=",".join(SCHEDULES))
    p.add_argument("--repeats", type=number(int, at_least=1), default=1)
    p.add_argument("--steps", type=number(int, at_least=1), default=120)
    p.add_argument("--nproc", type=number(int, at_least=1), default=None, help="default: GPUs if CUDA, else 2")
    p.add_argument("--out", type=Path, default=Path("runs/bench-recovery"))
    args = parse(p, argv, problems)

    nproc, device = workers(args.nproc)
    rows, failures = [], 0
    by_mode_layer: dict[tuple[str, str], list[float]] = {}
    goodputs: dict[str, list[tuple[float, float]]] = {}
    for mode in args.modes:
        for rep in range(args.repeats):
            run_dir = args.out / f"{mode}-{rep}"
            rc, _ = run_local(run_dir, mode=mode, steps=args.steps, faults=SCHEDULES[mode], nproc=nproc)
            if rc:
                failures += 1
                continue
            r = report(run_dir)
            goodputs.setdefault(mode, []).append((r["training_goodput"], r["infrastructure_goodput"]))
            for f in r["faults"]:
                if f["recovery_s"] is not None:
                    by_mode_layer.setdefault((mode, f["layer"]), []).append(f["recovery_s"])
    print(f"\nRecovery time per fault, {device}, {args.steps} steps, {args.repeats} repeat(s)\n")
    print("| mode | recovering layer | n | p50 s | p95 s | max s | training goodput | infra goodput |")
    print("|---|---|---|---|---|---|---|---|")
    for (mode, layer), values in sorted(by_mode_layer.items()):
        s = summary_stats(values)
        tg = sum(g[0] for g in goodputs[mode]) / len(goodputs[mode])
        ig = sum(g[1] for g in goodputs[mode]) / len(goodputs[mode])
        rows.append({"mode": mode, "layer": layer, **s, "training_goodput": tg, "infrastructure_goodput": ig})
        print(
            f"| {mode} | {layer} | {s['n']} | {fmt(s['p50'])} | {fmt(s['p95'])} | {fmt(s['max'])} "
            f"| {tg:.1%} | {ig:.1%} |"
        )
    (args.out / "results.json").write_text(json.dumps({"device": device, "rows": rows}, indent=2))
    if failures:
        print(f"\n{failures} run(s) FAILED; see the logs under {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
