"""Held-out check of the goodput planner: calibrate on one run, predict another of a different size.

``python -m benchmarks.whatif_holdout CALIBRATION_RUN HELD_OUT_RUN [--trials N] [--faults schedule|rate]``

Each argument is a run directory (``events.jsonl``; its ``report.json`` is used when present, else built). The
planner takes from the calibration run only what it measured: step time, checkpoint stall and write, per-layer
restart and per-class detection (``training.whatif.calibrate``), and the start-up (first ``launch`` -> first
``start``). From the held-out run it takes only what the experiment set: its node count, recovery mode, step
count, checkpoint interval, and, with ``--faults schedule`` (default), the faults it injected (kind and step).
``--faults rate`` instead uses the calibration run's measured fault rate per node. It prints the predicted training
goodput (p5 / p50 / p95 over the trials) next to the held-out run's measured one and the miss in points; exit
status 0 when the miss is within ``--tolerance`` points (default 5), 1 otherwise.

The node count of a run is the number of distinct ``node`` fields on its ``launch`` events (one per pod); give
``--calibration-nodes`` / ``--held-out-nodes`` when a launcher did not record them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from training.common.arguments import USAGE_ERROR, choices, message, number, parse, problem
from training.telemetry.events import EVENTS_FILE
from training.telemetry.goodput import load_events
from training.telemetry.report import build_report
from training.whatif.calibrate import KIND_CLASS, PROCESS_CRASH, calibrate
from training.whatif.engine import run_trials
from training.whatif.params import Scenario, ScenarioError


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's report (report.json, else built from its events) and its events."""
    events = load_events(run_dir).events
    path = run_dir / "report.json"
    report = json.loads(path.read_text()) if path.is_file() else json.loads(json.dumps(build_report(run_dir)[0]))
    return report, events


def nodes_of(events: list[dict[str, Any]], given: int | None, name: str) -> int:
    """Distinct ``node`` fields of the ``launch`` events, or ``given``."""
    if given:
        return given
    nodes = {e.get("node") for e in events if e["event"] == "launch" and e.get("node") is not None}
    if not nodes:
        raise ScenarioError(f"--{name}-nodes: the run's launch events record no node; give the node count")
    return len(nodes)


def mode_of(events: list[dict[str, Any]]) -> str:
    modes = [e["mode"] for e in events if e["event"] in ("launch", "start") and e.get("mode")]
    if not modes:
        raise ScenarioError("the run's launch/start events record no recovery mode")
    return str(modes[0])


def startup_of(events: list[dict[str, Any]]) -> float:
    """First ``launch`` -> first ``start``: what a job start costs before the loop (0 without a launch event)."""
    launch = next((e["ts"] for e in events if e["event"] == "launch"), None)
    start = next((e["ts"] for e in events if e["event"] == "start"), None)
    return max(0.0, start - launch) if launch is not None and start is not None else 0.0


def memory_tier_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The memory tier as the run used it: the interval between rank 0's snapshots and their median stall (none: off).
    Snapshots have peer copies whenever the run had another node (``training/checkpoint/memtier.py``)."""
    snaps = [e for e in events if e["event"] == "mem_snapshot" and e.get("rank") == 0 and not e.get("error")]
    steps = sorted({int(e["step"]) for e in snaps})
    gaps = [b - a for a, b in itertools.pairwise(steps) if b > a]
    if not gaps:
        return {}
    stalls = [float(e["stall_s"]) for e in snaps if isinstance(e.get("stall_s"), int | float)]
    return {
        "memory_interval": int(statistics.median(gaps)),
        "memory_stall_s": statistics.median(stalls) if stalls else 0.0,
        "memory_peer_copies": True,
    }


def schedule_of(report: dict[str, Any]) -> tuple[tuple[int, str], ...]:
    """The injected faults as (step, planner class)."""
    return tuple(
        (int(f["step"]), KIND_CLASS[f["kind"]])
        for f in report["faults"]
        if f.get("injected") and f.get("kind") in KIND_CLASS and isinstance(f.get("step"), int)
    )


def predict(
    calibration: Path,
    held_out: Path,
    *,
    trials: int = 200,
    faults: str = "schedule",
    calibration_nodes: int | None = None,
    held_out_nodes: int | None = None,
) -> dict[str, Any]:
    """The planner's prediction for ``held_out`` from what ``calibration`` measured, and the measured figure."""
    cal_report, cal_events = load_run(calibration)
    out_report, out_events = load_run(held_out)
    cal_nodes = nodes_of(cal_events, calibration_nodes, "calibration")
    out_nodes = nodes_of(out_events, held_out_nodes, "held-out")
    base = Scenario(nodes=cal_nodes, mode=mode_of(cal_events), startup_s=startup_of(cal_events))
    cal = calibrate(cal_report, base)
    sc = cal.apply(base, faults=faults == "rate", report_nodes=cal_nodes)
    classes = {c.name: c for c in (PROCESS_CRASH, *sc.fault_classes, *cal.observed_classes)}  # measured ones win
    changes: dict[str, Any] = {"nodes": out_nodes, "mode": mode_of(out_events), "steps": out_report["final_step"]}
    changes |= memory_tier_of(out_events)  # what the held-out run was set to (its snapshots' cadence)
    # A lost node's job-layer restart, as calibrated, is the measured fault -> new step less detection: it already
    # holds the wait for the replacement pod, which both runs share (training.local --node-replace-s).
    changes["node_replace_s"] = 0.0
    interval = (out_report.get("advice") or {}).get("current_interval_steps")
    if interval:
        changes["interval"] = interval
    if faults == "schedule":
        changes |= {"fault_schedule": schedule_of(out_report), "node_mtbf_hours": None,
                    "fault_classes": tuple(classes.values())}  # fmt: skip
    sc = replace(sc, **changes, trials=trials).validate()
    summary = run_trials(sc)
    measured = out_report["training_goodput"]
    predicted = summary.training_goodput
    return {
        "calibration": {
            "run": str(calibration),
            "nodes": cal_nodes,
            "training_goodput": cal_report["training_goodput"],
        },
        "held_out": {
            "run": str(held_out),
            "nodes": out_nodes,
            "training_goodput": measured,
            "step_s": (out_report["checkpoint"] or {}).get("step_s_without_checkpoints"),
        },
        "predicted": predicted,
        "predicted_step_s": sc.step_time,
        "faults": faults,
        "fault_schedule": [f"{c}@{s}" for s, c in sc.fault_schedule],
        "miss_points": None if measured is None else 100 * (predicted["p50"] - measured),
        "notes": cal.notes,
    }


def problems(args: argparse.Namespace) -> list[str]:
    """Run directories without an event log (nothing to calibrate on or to predict)."""
    return [
        problem(name, f"a run directory holding {EVENTS_FILE}", str(path))
        for name, path in (("CALIBRATION", args.calibration), ("HELD_OUT", args.held_out))
        if not (path / EVENTS_FILE).is_file()
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.whatif_holdout", description=__doc__.split("\n\n")[0])
    p.add_argument("calibration", type=Path, help="run directory the planner is calibrated on")
    p.add_argument("held_out", type=Path, help="run directory whose training goodput is predicted")
    p.add_argument("--trials", type=number(int, at_least=1), default=200)
    p.add_argument("--faults", **choices(("schedule", "rate")), default="schedule")
    p.add_argument("--calibration-nodes", type=number(int, at_least=1))
    p.add_argument("--held-out-nodes", type=number(int, at_least=1))
    p.add_argument(
        "--tolerance", type=number(float, at_least=0), default=5.0, help="allowed miss in points (default 5)"
    )
    p.add_argument("--json", type=Path, help="also write the result here")
    args = parse(p, argv, problems)
    try:
        r = predict(args.calibration, args.held_out, trials=args.trials, faults=args.faults,
                    calibration_nodes=args.calibration_nodes, held_out_nodes=args.held_out_nodes)  # fmt: skip
    except (ScenarioError, FileNotFoundError) as exc:
        print(message(p.prog, [str(exc)]), end="", file=sys.stderr)
        return USAGE_ERROR
    pr, ho = r["predicted"], r["held_out"]
    print(f"calibration {r['calibration']['run']} ({r['calibration']['nodes']} nodes), "
          f"held out {ho['run']} ({ho['nodes']} nodes), faults from the {r['faults']}")  # fmt: skip
    print(f"  step time: predicted {r['predicted_step_s']:.4f} s, held-out run measured {ho['step_s']} s")
    print(f"  training goodput: predicted p5 {100 * pr['p5']:.1f}% / p50 {100 * pr['p50']:.1f}% / "
          f"p95 {100 * pr['p95']:.1f}%, measured {_pct(ho['training_goodput'])}")  # fmt: skip
    miss = r["miss_points"]
    print(f"  miss: {'n/a' if miss is None else f'{miss:+.1f} points'} (tolerance {args.tolerance:g})")
    if args.json:
        args.json.write_text(json.dumps(r, indent=2) + "\n")
    return 0 if miss is not None and abs(miss) <= args.tolerance else 1


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


if __name__ == "__main__":
    sys.exit(main())
