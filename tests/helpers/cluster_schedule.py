"""The local cluster's shared fault schedule (``tests/integration/training/test_cluster_*.py``) and what a failing
assertion about its restarts needs to say."""

from __future__ import annotations

import json
from pathlib import Path

STEPS = 40
# An eviction takes effect within about a second (its pod must stop), while tiny CPU steps take milliseconds: it
# comes last, so that no other fault fires during its wind-down.
# The exception comes first, in the settled first world: on CI it once came 0.7 s after a replaced pod had rejoined
# and was recovered by ft_launcher instead of in-process (a slower recovery, not a wrong one; cause not found).
FAULTS = "exception@5:1,node-loss@12:1,sigkill@19:0,node-loss@26:0,evict@33:1"


def restarts_told(run_dir: Path) -> str:
    """What a failing layer assertion needs (a CI machine keeps nothing): every restart and exit event, and the pods'
    log lines about restarts, exits and errors."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    keep = ("restart_begin", "restart_end", "exit", "fault_injected")
    lines = [
        f"{e['ts']:.2f} rank {e['rank']} {e['layer']} {e['event']} {e.get('cause', e.get('kind', ''))}"
        for e in events
        if e["event"] in keep
    ]
    marks = ("restart", "Restart", "Error", "exit", "Terminated", "timed out", "Timed out")
    for log in sorted((run_dir / "pods").glob("*.log")):
        lines += [
            f"{log.stem}: {x[:300]}" for x in log.read_text(errors="replace").splitlines() if any(m in x for m in marks)
        ]
    return "\n".join(lines[-150:])
