"""Bitwise-deterministic resume: >= 3 faults across the layers vs an uninterrupted run (issue 6)."""

from __future__ import annotations

import copy
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.training_runs import FAST_CONFIG, local_run
from training.telemetry.events import read_events
from training.telemetry.goodput import analyze, load_events

pytestmark = pytest.mark.integration

STEPS = 30
#: exception -> in-process, sigkill -> ft_launcher, hang -> in-process, comm -> in-process
FAULTS = "exception@6:1,sigkill@13:0,hang@19:1,comm@26:0"


def _losses(run_dir: Path) -> dict[int, float]:
    """Per-step losses from events.jsonl; for re-executed steps the last occurrence wins."""
    return {e["step"]: e["loss"] for e in read_events(run_dir) if e["event"] == "step"}


def test_faulted_run_is_bitwise_equal_to_uninterrupted(tmp_path: Path) -> None:
    cfg: dict[str, Any] = copy.deepcopy(FAST_CONFIG)

    def go(name: str, faults: str) -> Any:
        return local_run(tmp_path / name, config=cfg, steps=STEPS, faults=faults)

    with ThreadPoolExecutor(max_workers=2) as pool:
        clean, faulted = pool.map(lambda a: go(*a), [("clean", ""), ("faulted", FAULTS)])
    for proc in (clean, faulted):
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    a = json.loads((tmp_path / "clean" / "summary.json").read_text())
    b = json.loads((tmp_path / "faulted" / "summary.json").read_text())
    assert b["faults_injected"] == 4
    assert b["restarts_by_layer"]["inprocess"] >= 3 and b["restarts_by_layer"]["ft_launcher"] >= 1, b
    assert a["final_step"] == b["final_step"] == STEPS
    assert a["final_state_sha256"] == b["final_state_sha256"]
    la, lb = _losses(tmp_path / "clean"), _losses(tmp_path / "faulted")
    assert sorted(la) == list(range(1, STEPS + 1))
    assert la == lb
    # The memory tier (a snapshot every 5 steps, the default) rolls each fault back to the snapshot before it: own
    # memory after an in-process restart, /dev/shm after ft_launcher respawned the workers; never storage (step 25).
    # Rollback: the last step completed before the fault (the fault's step - 1: each fires as its step begins) - the
    # restored step (docs/goodput.md).
    run = analyze(load_events(tmp_path / "faulted").events)
    restored = [(f.kind, f.step, f.restored_step, f.restore_tier, f.rollback_steps) for f in run.faults if f.injected]
    assert restored == [
        ("exception", 6, 5, "memory", 0),
        ("sigkill", 13, 10, "shm", 2),
        ("hang", 19, 15, "memory", 3),
        ("comm", 26, 25, "memory", 0),
    ]
    # Each restart had a snapshot to restore, so it built its model on the meta device and initialised nothing (the
    # first fault came before any storage checkpoint); only the first start initialised weights.
    builds = [e["meta"] for e in read_events(tmp_path / "faulted") if e["event"] == "phase" and e["phase"] == "model"]
    assert builds[:2] == [False, False] and builds[2:] == [True] * 8, builds
