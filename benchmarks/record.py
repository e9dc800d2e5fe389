"""The benchmark record: the figures of issue 16's table under stable keys in ``docs/benchmarks.json``.

``python -m benchmarks.record --machine h200x2 [--ckpt-dir DIR] [--recovery-dir DIR] [--startup-dir DIR]
[--scale-ckpt-dir DIR] [--scale-run-dir DIR] [--extra FILE.json] [--update] [--out docs/benchmarks.json]``

Reads the run directories that the benchmark scripts leave (``benchmarks.checkpoint_staging --out DIR``: one
directory per variant; ``benchmarks.recovery --out DIR``: one per mode and repeat) and merges one entry per
machine into the record, with the date, the commit and the device. A key whose benchmark did not run is ``null``,
never a guess. ``--extra`` merges figures that another script measured (a JSON object of key -> number).
``--update`` keeps the machine's earlier figures of the keys not measured now, each named with the commit and date it
was measured at under ``carried``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, report
from training.common.arguments import parse, problem
from training.telemetry.events import read_events

#: Pinned device-to-host bandwidth (GB/s) that bounds the stall of a save from below (issue 16's floor).
D2H_GBPS = 55.0
KEYS = (
    "async_ckpt_efficiency_1b_300",
    "async_ckpt_efficiency_1b_100",
    "ckpt_commit_s_p50_1b_100",
    "ckpt_stall_s_first",
    "ckpt_stall_s_p50",
    "ckpt_stall_floor_s",
    "ckpt_commit_s_p50",
    "inprocess_recovery_s_p50",
    "hang_recovery_s",
    "ft_launcher_recovery_s_p50",
    "launch_to_first_step_s",
    "rollback_steps_p50_memory_tier",
    "rollback_steps_p50_storage_only",
    # the 1B model with the project's defaults (scripts/gpu_bench.sh OUT scale; issue 46)
    "async_mem_efficiency_1b_100",
    "mem_snapshot_stall_s_p50_1b",
    "memory_restore_s_1b",
    "inprocess_recovery_s_p50_1b",
    "hang_recovery_s_1b",
    "ft_launcher_recovery_s_1b",
)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def checkpoint_figures(ckpt_dir: Path, variant: str = "async") -> dict[str, Any]:
    """Stall (first and p50), commit p50, the stall floor and efficiency vs ``none`` from rank 0's event logs."""
    events = [e for e in read_events(ckpt_dir / variant) if e.get("rank", 0) == 0]
    stalls = [e["stall_s"] for e in events if e["event"] == "ckpt_staged"]
    commits = [e["write_s"] for e in events if e["event"] == "ckpt_committed"]
    sizes = [e["bytes"] for e in events if e["event"] == "ckpt_committed" and e.get("bytes")]
    recorded = json.loads((ckpt_dir / "results.json").read_text())
    results, world = recorded["results"], recorded.get("world_size")
    return {
        "async_ckpt_efficiency": results.get(variant, {}).get("efficiency_vs_none"),
        "ckpt_stall_s_first": stalls[0] if stalls else None,
        "ckpt_stall_s_p50": _median(stalls),
        "ckpt_stall_floor_s": sizes[0] / world / (D2H_GBPS * 1e9) if sizes and world else None,
        "ckpt_commit_s_p50": _median(commits),
    }


def recovery_figures(recovery_dir: Path) -> dict[str, Any]:
    """Recovery p50 per layer (mode ``inprocess``'s in-process faults, mode ``ft-launcher``'s), and the hang's."""
    by: dict[str, list[float]] = {"inprocess": [], "ft_launcher": [], "hang": []}
    for run_dir in sorted(p for p in recovery_dir.iterdir() if (p / "events.jsonl").is_file()):
        mode = run_dir.name.rsplit("-", 1)[0]
        for fault in report(run_dir)["faults"]:
            if fault["recovery_s"] is None:
                continue
            if mode == "inprocess" and fault["layer"] == "inprocess":
                by["hang" if fault["kind"] == "hang" else "inprocess"].append(fault["recovery_s"])
            elif mode == "ft-launcher" and fault["layer"] == "ft_launcher":
                by["ft_launcher"].append(fault["recovery_s"])
    return {
        "inprocess_recovery_s_p50": _median(by["inprocess"]),
        "hang_recovery_s": _median(by["hang"]),
        "ft_launcher_recovery_s_p50": _median(by["ft_launcher"]),
    }


def scale_checkpoint_figures(ckpt_dir: Path) -> dict[str, Any]:
    """The 1B benchmark with a save every 100 steps: ``async+mem``'s efficiency against ``none`` and its snapshots'
    p50 stall, and ``async``'s efficiency where it ran."""
    results = json.loads((ckpt_dir / "results.json").read_text())["results"]
    mem, plain = results.get("async+mem", {}), results.get("async", {})
    return {
        "async_mem_efficiency_1b_100": mem.get("efficiency_vs_none"),
        "mem_snapshot_stall_s_p50_1b": mem.get("mem_stall_s_p50"),
        "async_ckpt_efficiency_1b_100": plain.get("efficiency_vs_none"),
    }


def scale_run_figures(run_dir: Path) -> dict[str, Any]:
    """The faulted 1B run: recovery (fault -> first new step) of its exception (in-process), hang and SIGKILL
    (ft_launcher), and the p50 time a restore took to load the state from host memory (own memory or /dev/shm)."""
    faults = report(run_dir)["faults"]

    def recovery(kind: str, layer: str) -> list[float]:
        return [f["recovery_s"] for f in faults if f["kind"] == kind and f["layer"] == layer and f["recovery_s"]]

    loads = [
        e["load_s"]
        for e in read_events(run_dir)
        if e["event"] == "restore" and e.get("tier") in ("memory", "shm") and e.get("load_s") is not None
    ]
    return {
        "inprocess_recovery_s_p50_1b": _median(recovery("exception", "inprocess")),
        "hang_recovery_s_1b": _median(recovery("hang", "inprocess")),
        "ft_launcher_recovery_s_1b": _median(recovery("sigkill", "ft_launcher")),
        "memory_restore_s_1b": _median(loads),
    }


def startup_figures(startup_dir: Path) -> dict[str, Any]:
    """Launch -> rank 0's first step of a first start (``benchmarks.startup``'s ``total`` row)."""
    rows = json.loads((startup_dir / "results.json").read_text())["rows"]
    total = next(r for r in rows if r["phase"] == "total")
    return {"launch_to_first_step_s": total["first_start_s"]}


def carry_over(earlier: dict[str, Any], figures: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``figures`` with the ``earlier`` entry's value of each key not measured now, and where each carried value
    comes from (``"<commit> <date>"``, kept from the earlier entry's own ``carried`` where it was carried already)."""
    before = earlier.get("carried", {})
    merged, carried = dict(figures), {}
    for key, value in figures.items():
        if value is None and earlier.get(key) is not None:
            merged[key] = earlier[key]
            carried[key] = before.get(key, f"{earlier.get('commit')} {earlier.get('date')}")
    return merged, carried


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def problems(args: argparse.Namespace) -> list[str]:
    """Inputs that are not there, or an ``--extra`` that is not a JSON object of the record's keys; checked before
    anything is read or written."""
    lines = []
    if not args.machine.strip():
        lines.append(problem("--machine", 'the record\'s key, e.g. "h200x2"', args.machine))
    dirs = {
        "--ckpt-dir": args.ckpt_dir,
        "--recovery-dir": args.recovery_dir,
        "--startup-dir": args.startup_dir,
        "--scale-ckpt-dir": args.scale_ckpt_dir,
    }
    for flag, path in dirs.items():
        if path is not None and not (path / "results.json").is_file():
            lines.append(problem(flag, "a benchmark's --out directory holding results.json", str(path)))
    if args.scale_run_dir is not None and not (args.scale_run_dir / "events.jsonl").is_file():
        lines.append(
            problem("--scale-run-dir", "a training.local run directory holding events.jsonl", args.scale_run_dir)
        )
    if args.extra is not None:
        try:
            extra = json.loads(args.extra.read_text())
        except (OSError, ValueError) as exc:
            return [*lines, problem("--extra", f"a JSON object of further key -> figure ({exc})", str(args.extra))]
        unknown = sorted(set(extra) - set(KEYS)) if isinstance(extra, dict) else ["(not an object)"]
        if unknown:
            lines.append(problem("--extra", f"a JSON object of the record's keys ({', '.join(KEYS)})", unknown))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.record", description=__doc__.split("\n\n")[0])
    p.add_argument("--machine", required=True, help='the record\'s key, e.g. "h200x2", "h200x8", "cpu"')
    p.add_argument("--device", default="", help="the device in words (default: from the checkpoint results)")
    p.add_argument("--ckpt-dir", type=Path, help="benchmarks.checkpoint_staging --out of a 300-step-interval run")
    p.add_argument("--recovery-dir", type=Path, help="benchmarks.recovery --out")
    p.add_argument("--startup-dir", type=Path, help="benchmarks.startup --out")
    p.add_argument("--scale-ckpt-dir", type=Path, help="benchmarks.checkpoint_staging --out of the 1B, 100-step run")
    p.add_argument("--scale-run-dir", type=Path, help="the faulted 1B training.local run directory")
    p.add_argument("--extra", type=Path, help="a JSON object of further key -> figure")
    p.add_argument("--commit", default=None, help="the commit the benchmarks ran (default: HEAD's)")
    p.add_argument("--update", action="store_true", help="keep the earlier figures of keys not measured now")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.json")
    args = parse(p, argv, problems)

    figures: dict[str, Any] = dict.fromkeys(KEYS)
    device = args.device
    if args.ckpt_dir:
        ck = checkpoint_figures(args.ckpt_dir)
        figures["async_ckpt_efficiency_1b_300"] = ck.pop("async_ckpt_efficiency")
        figures.update(ck)
        device = device or json.loads((args.ckpt_dir / "results.json").read_text())["device"]
    if args.recovery_dir:
        figures.update(recovery_figures(args.recovery_dir))
    if args.startup_dir:
        figures.update(startup_figures(args.startup_dir))
    if args.scale_ckpt_dir:
        figures.update({k: v for k, v in scale_checkpoint_figures(args.scale_ckpt_dir).items() if v is not None})
        device = device or json.loads((args.scale_ckpt_dir / "results.json").read_text())["device"]
    if args.scale_run_dir:
        figures.update(scale_run_figures(args.scale_run_dir))
    if args.extra:
        figures.update(json.loads(args.extra.read_text()))
    record = json.loads(args.out.read_text()) if args.out.is_file() else {}
    entry: dict[str, Any] = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": args.commit or _commit()}
    if args.update and args.machine in record:
        figures, carried = carry_over(record[args.machine], figures)
        device = device or record[args.machine].get("device", "")
        entry["carried"] = carried
    record[args.machine] = {**entry, "device": device, **figures}
    args.out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    width = max(map(len, KEYS))
    print(f"{args.out} [{args.machine}] ({device}):")
    for k in KEYS:
        print(f"  {k:<{width}}  {'not measured' if figures[k] is None else figures[k]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
