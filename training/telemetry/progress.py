"""Following a run while it happens: an incremental reader of ``events.jsonl`` and a progress printer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from training.telemetry.events import EVENTS_FILE


class EventTail:
    """Reads the events appended to ``RUN_DIR/events.jsonl`` since the last call (a torn last line waits)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / EVENTS_FILE
        self.pos = 0
        self.max_step = 0

    def poll(self) -> list[dict[str, Any]]:
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return []
        lines = data.split("\n")
        self.pos += len(data) - len(lines[-1])
        out = []
        for line in lines[:-1]:
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            if e.get("event") == "step" and isinstance(e.get("step"), int):
                self.max_step = max(self.max_step, e["step"])
            out.append(e)
        return out


def describe(e: dict[str, Any], every: int, target: int) -> str | None:
    """The progress line for one event, or None when it is not worth a line."""
    ev = e["event"]
    if ev == "step" and (e["step"] % every == 0 or e["step"] == target):
        return f"step {e['step']:>5}/{target}  loss {e['loss']:.4f}"
    if ev == "fault_injected":
        phase = e.get("phase") or "step"
        where = f"step {e['step']}" if phase == "step" else f"{phase} of step {e['step']}"
        who = f"pod {e['pod']}" if e.get("pod") is not None else f"rank {e['fault_rank']}"
        return f"FAULT  {e['kind']} injected on {who} at {where}"
    if ev == "restart_begin" and e["rank"] == 0:
        return f"RESTART begin: layer {e['layer']}, cause {e['cause']}"
    if ev == "restart_end" and e["rank"] == 0:
        return f"RESTART end:   layer {e['layer']}, resumed from step {e.get('resumed_step')}"
    if ev == "restore" and e.get("tier") == "none":
        return f"nothing to restore ({e.get('reason') or 'no checkpoint'}): training starts at step 0"
    if ev == "restore" and e.get("from_step") is not None:
        return f"restored checkpoint of step {e['from_step']} ({e.get('tier')})"
    if ev == "ckpt_quarantined":
        return f"checkpoint of step {e['step']} quarantined: {e['reason']}"
    if ev == "ckpt_failed":
        return f"checkpoint of step {e['step']} FAILED: {e['error']}"
    if ev == "exit" and e["code"]:
        return f"rank {e['rank']} exited with code {e['code']} ({e['reason']})"
    return None


class Progress(threading.Thread):
    """Follows ``events.jsonl`` on a thread and prints a line per ``every`` steps and per fault / restart / exit.

    ``on_events`` (optional) also gets every batch of new events (the multi-node runner triggers node faults there).
    """

    def __init__(
        self,
        run_dir: Path,
        every: int,
        target: int,
        t0: float,
        on_events: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.tail = EventTail(run_dir)
        self.every = max(1, every)
        self.target = target
        self.t0 = t0
        self.on_events = on_events
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.poll()
            time.sleep(0.2)
        self.poll()

    def poll(self) -> None:
        events = self.tail.poll()
        for e in events:
            line = describe(e, self.every, self.target)
            if line is not None:
                print(f"[{time.monotonic() - self.t0:6.1f}s] {line}", flush=True)
        if events and self.on_events is not None:
            self.on_events(events)
