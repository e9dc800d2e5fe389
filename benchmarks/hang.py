"""Hang detection and recovery per world size, and which path caught the hang.

``python -m benchmarks.hang [--world-sizes 1,2] [--repeats 1] [--steps 60] [--out runs/bench-hang]``

Per world size W: one ``training.local`` run (mode ``inprocess-ft``) with ``hang@30:<W-1>`` (the last rank spins in
Python without progress), and one fault-free run of the same length (a false positive would show as a restart).
Prints, per run, the recovering layer, detection (fault -> the layer's restart) and recovery (fault -> first new
step) from the goodput analysis, the derived step soft/hard timeouts (``hang_timeouts`` events), and the NVRx
interruption that ended the iteration (``RankShouldRestart('Interruption.<KIND> on ranks={...}')`` in the launcher
log): ``SOFT_TIMEOUT`` is NVRx's progress timeout, ``EXCEPTION`` a rank whose collective timed out.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from benchmarks.common import fmt, report, run_local, schedule_lines, workers
from training.common.arguments import listed, number, parse, port

#: The fault of every faulted run, on the last rank.
HANG = "hang@30"

#: NVRx 0.4.1 writes ``Interruption.SOFT_TIMEOUT on ranks={0, 1}``,
#: 0.7.0 ``Interruption.EXCEPTION affecting ranks {0}``.
INTERRUPTION = re.compile(
    r"RankShouldRestart\('Interruption\.([A-Z_]+) (?:on ranks=|affecting ranks )\{([0-9, ]*)\}'\)"
)


def interruption(run_dir: Path) -> str:
    """The first NVRx interruption in the launcher log, e.g. ``SOFT_TIMEOUT (ranks 0, 1)``; ``-`` if none."""
    log = run_dir / "launcher.log"
    m = INTERRUPTION.search(log.read_text(errors="replace")) if log.exists() else None
    return f"{m.group(1)} (ranks {m.group(2)})" if m else "-"


def derived_timeouts(run_dir: Path) -> tuple[float | None, float | None]:
    """The last derived step soft/hard timeouts of the run's ``hang_timeouts`` events."""
    soft = hard = None
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("event") == "hang_timeouts":
            soft, hard = e["soft_s"], e["hard_s"]
    return soft, hard


def one(out: Path, world: int, steps: int, faults: str, rep: int, port: int) -> dict[str, Any]:
    name = f"ws{world}-{'hang' if faults else 'clean'}-{rep}"
    run_dir = out / name
    rc, _ = run_local(run_dir, mode="inprocess-ft", steps=steps, faults=faults, nproc=world, port=port)
    row: dict[str, Any] = {"run": name, "world_size": world, "faults": faults or "(none)", "exit": rc}
    if rc:
        return row
    r = report(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    fault = r["faults"][0] if r["faults"] else {}
    soft, hard = derived_timeouts(run_dir)
    row.update(
        layer=fault.get("layer", "-"),
        detection_s=fault.get("detection_s"),
        recovery_s=fault.get("recovery_s"),
        restarts=sum(summary["restarts_by_layer"].values()),
        soft_s=soft,
        hard_s=hard,
        interruption=interruption(run_dir),
        sha256=summary["final_state_sha256"][:16],
    )
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.hang", description=__doc__.split("\n\n")[0])
    p.add_argument("--world-sizes", type=listed(number(int, at_least=1)), default="1,2")
    p.add_argument("--repeats", type=number(int, at_least=1), default=1)
    p.add_argument("--steps", type=number(int, at_least=1), default=60)
    p.add_argument("--port", type=port, default=29800)
    p.add_argument("--out", type=Path, default=Path("runs/bench-hang"))
    args = parse(p, argv, lambda a: schedule_lines("--steps:", HANG, a.steps, 1))

    rows = []
    for world in args.world_sizes:
        _, device = workers(world)
        for rep in range(args.repeats):
            rows.append(one(args.out, world, args.steps, f"{HANG}:{world - 1}", rep, args.port))
        rows.append(one(args.out, world, args.steps, "", 0, args.port))
    print(f"\nHang detection, {device.split(' ', 1)[1]}, {args.steps} steps, mode inprocess-ft\n")
    cols = ("world size", "fault", "exit", "layer", "detection s", "recovery s", "restarts", "step soft / hard s")
    print(f"| {' | '.join(cols)} | NVRx interruption |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["exit"]:
            print(f"| {r['world_size']} | {r['faults']} | {r['exit']} | FAILED | | | | | |")
            continue
        print(
            f"| {r['world_size']} | {r['faults']} | 0 | {r['layer']} | {fmt(r['detection_s'])} "
            f"| {fmt(r['recovery_s'])} | {r['restarts']} | {fmt(r['soft_s'])} / {fmt(r['hard_s'])} "
            f"| {r['interruption']} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2))
    return 1 if any(r["exit"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
