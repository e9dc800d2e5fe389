"""Fault matrix (issue 6): kinds x phases, plus storage faults, with real processes and signals.

One run per kind injects that kind once in every phase (init, first step, mid-training, during an async
checkpoint write, during restore, during eval); the runs go two at a time. Every cell must be recovered by
the intended layer with no committed progress lost, and the run must reach its target step. Storage cells
must end with the distinct CHECKPOINT_WRITE exit code and a message naming the cause, or (slow storage)
finish with back-pressure. Checkpoint cells (:data:`CHECKPOINT_CELLS`) check that committed work is never lost:
no launch goes back to step 0 and no committed checkpoint is deleted when its marker, its root or its storage
fails. Results go to ``$RELIABILITY_RESULTS`` (default ``runs/reliability/fault_matrix.json``)
for ``scripts/reliability_report.py``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from platform_config.schema import FaultConfig
from tests.helpers import nvrx_saves
from tests.helpers.blocked_checkpoint_collective import blocked_restore
from tests.helpers.cluster_schedule import restarts_told
from tests.helpers.training_runs import (
    FAST_CONFIG,
    REPO_ROOT,
    local_run,
    make_marker_unreadable,
    mount_tmpfs,
    unmount,
)
from tests.helpers.training_runs import test_env as child_env
from training.checkpoint.files import COMMIT_MARKER, step_dir_name
from training.resilience.exit_codes import ExitCode, classify
from training.resilience.faults import parse_schedule
from training.telemetry.events import read_events
from training.telemetry.goodput import analyze

#: The first test waits for the whole matrix (the module fixture): 107 s on a fast 2-core machine, 321 s on a slow one,
#: over the suite's 300 s per-test bound. Each run has its own timeout; this bound is only against a hang.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

KINDS = ("exception", "hang", "sigkill", "oom")
EXPECTED_LAYER = {"exception": "inprocess", "hang": "inprocess", "oom": "inprocess", "sigkill": "ft_launcher"}
STEPS = 24
#: phase label -> schedule entry template (fault rank alternates so both ranks are exercised)
PHASES: dict[str, str] = {
    "init": "{k}@0:1/init",
    "first step": "{k}@1:0",
    "mid-training": "{k}@7:1",
    "async checkpoint write": "{k}@10:0/checkpoint",
    "restore": "{k}@0:1/restore",
    "eval": "{k}@20:1/eval",
}
#: The step each phase's recovery resumes from (issue 48, item 8: exact, not "at least the last commit"), with the
#: memory tier every 5 steps (:func:`_config`) and storage saves every 5: the newest snapshot every rank holds. Init
#: and first step: nothing yet (0). Mid-training (before step 7): step 5. During the async write of step 10: the
#: snapshot of step 10, taken before the save. Restore (fires in the mid-training recovery's restore): step 5 again.
#: Eval at step 20 (after the step and its save): step 20.
EXPECTED_RESUME = {
    "init": 0,
    "first step": 0,
    "mid-training": 5,
    "async checkpoint write": 10,
    "restore": 5,
    "eval": 20,
}
#: Restores that fail before a storage error escalates to exit 21 (the ledger's limit, plus the one that exceeds it).
MAX_REPEATS = FaultConfig().max_repeats
RESULTS = Path(os.environ.get("RELIABILITY_RESULTS", REPO_ROOT / "runs" / "reliability" / "fault_matrix.json"))
#: What some cells' runs returned, by cell (for the tests that look closer than the cell's ``ok``; not in RESULTS).
RAW: dict[str, Any] = {}


def _config(**extra: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(FAST_CONFIG)
    cfg["train"].update(eval_interval=10, eval_batches=1)
    cfg["checkpoint"]["memory_interval_steps"] = 5  # a fixed interval: the resume steps are known (EXPECTED_RESUME)
    cfg["local"] = {"ft": {"max_restarts": 8}}
    for key, value in extra.items():
        cfg.setdefault(key, {}).update(value)
    return cfg


def _kind_run(kind: str, root: Path) -> dict[str, Any]:
    schedule = ",".join(t.format(k=kind) for t in PHASES.values())
    t0 = time.monotonic()
    proc = local_run(root / kind, config=_config(), steps=STEPS, faults=schedule)
    return {"proc": proc, "run_dir": root / kind, "wall_s": time.monotonic() - t0}


def _evaluate_kind(kind: str, run: dict[str, Any]) -> list[dict[str, Any]]:
    """One cell per phase: the layer that restarted after the fault and whether committed progress was kept."""
    proc, run_dir = run["proc"], run["run_dir"]
    summary_path = run_dir / "summary.json"
    final = json.loads(summary_path.read_text())["final_step"] if summary_path.is_file() else None
    events = read_events(run_dir) if (run_dir / "events.jsonl").is_file() else []
    analysis = analyze(events)  # the report's recovery time: fault -> first new step after the restore
    cells = []
    for phase, template in PHASES.items():
        entry = template.format(k=kind)
        canonical = str(parse_schedule(entry)[0])
        fault = next((e for e in events if e["event"] == "fault_injected" and e.get("scheduled") == canonical), None)
        cell: dict[str, Any] = {"kind": kind, "phase": phase, "schedule": entry, "expected_layer": EXPECTED_LAYER[kind]}
        if fault is None:
            cells.append({**cell, "ok": False, "outcome": "fault did not fire"})
            continue
        later = [e for e in events if e["ts"] > fault["ts"]]
        begin = next((e for e in later if e["event"] == "restart_begin"), None)
        end = next((e for e in later if e["event"] == "restart_end"), None)
        resumed = end.get("resumed_step") if end else None
        # what storage held when the ranks resumed (a save staged before the fault may commit after it)
        until = end["ts"] if end else fault["ts"]
        kept = max((e["step"] for e in events if e["event"] == "ckpt_committed" and e["ts"] < until), default=0)
        measured = next((f for f in analysis.faults if f.injected and f.ts == fault["ts"]), None)
        recovery_s = round(measured.recovery_s, 2) if measured and measured.recovery_s is not None else None
        ok = (
            begin is not None
            and begin["layer"] == EXPECTED_LAYER[kind]
            and resumed == EXPECTED_RESUME[phase]
            and resumed >= kept
            and proc.returncode == 0
            and final == STEPS
        )
        outcome = (
            f"recovered by {begin['layer']} in {recovery_s} s, resumed at step {resumed} (expected "
            f"{EXPECTED_RESUME[phase]}; storage held step {kept})"
            if begin and end
            else f"no restart seen (exit {proc.returncode})"
        )
        cell.update(ok=ok, layer=begin and begin["layer"], recovery_s=recovery_s, outcome=outcome)
        if not ok:  # what a CI machine that keeps nothing can tell: the restarts, exits and discarded ranks
            cell["told"] = restarts_told(run_dir)
        cells.append(cell)
    return cells


#: Storage cells: name -> (checkpoint mode of the run, the checkpoint file system (a 64 KiB tmpfs, full or
#: read-only; None: the run dir's), injected write delay).
STORAGE: dict[str, tuple[str, str | None, float]] = {
    "full disk, sync save (dcp.save)": ("sync-ckpt", "full", 0.0),
    "full disk, async save (torch dcp.async_save)": ("async-ckpt", "full", 0.0),
    "read-only file system": ("async-ckpt", "read-only", 0.0),
    "slow storage": ("async-ckpt", None, 1.0),
}
#: The least back-pressure the slow-storage cell's 1.0 s writes must cause: the 5 steps between saves take well under
#: 0.5 s on CPU, so the next save waits at least half the write.
SLOW_WAIT_S = 0.5
#: The NVRx path cannot train on CPU (its queue calls CUDA): its full-disk cell runs NVRx's writer on CPU tensors.
NVRX_FULL_DISK = "full disk, NVRx async save (NVRx's writer on CPU tensors)"
#: What a storage cell's message must say, by cell.
STORAGE_CAUSE = {
    "read-only file system": "likely cause: the file system is mounted read-only",
    NVRX_FULL_DISK: "likely cause: the file system is full",
}


def _storage_run(name: str, root: Path) -> dict[str, Any]:
    """A full (tiny tmpfs) or read-only (read-only tmpfs) checkpoint file system, or slow storage (a write delay)."""
    run_dir = root / re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    mode, fs, delay = STORAGE[name]
    env = child_env()
    extra: dict[str, Any] = {}
    mount = run_dir.with_name(run_dir.name + "-mnt")
    if fs is not None:
        if not mount_tmpfs(mount, "64k", read_only=fs == "read-only"):
            return {"name": name, "skipped": "needs root to mount a tmpfs"}
        extra["checkpoint"] = {"dir": str(mount) if fs == "read-only" else str(mount / "ckpt")}
    if delay:
        env["TRAINING_CKPT_WRITE_DELAY_S"] = str(delay)
    try:
        proc = local_run(run_dir, config=_config(**extra), steps=12, mode=mode, env=env, timeout_s=180)
    finally:
        if fs is not None:
            unmount(mount)
    return {"name": name, "proc": proc, "run_dir": run_dir}


def _nvrx_full_disk(root: Path) -> dict[str, Any]:
    mount = root / "nvrx-full-disk-mnt"
    cell: dict[str, Any] = {"kind": "storage", "phase": NVRX_FULL_DISK}
    if not mount_tmpfs(mount, "512k"):
        return {**cell, "ok": None, "outcome": "skipped: needs root to mount a tmpfs"}
    try:
        out = nvrx_saves.run(root / "nvrx-full-disk", mount / "ckpt", "as-is")
    finally:
        unmount(mount)
    RAW[NVRX_FULL_DISK] = {"out": out, "mount": mount}
    line = next((ln for ln in out.splitlines() if ln.startswith("maybe_finalize raised:")), out.strip()[-300:])
    ok = line.startswith("maybe_finalize raised: checkpoint at step 1 failed") and STORAGE_CAUSE[NVRX_FULL_DISK] in line
    return {**cell, "ok": ok, "outcome": line[:400]}


def _evaluate_storage(run: dict[str, Any]) -> dict[str, Any]:
    name = run["name"]
    cell: dict[str, Any] = {"kind": "storage", "phase": name}
    if "skipped" in run:
        return {**cell, "ok": None, "outcome": f"skipped: {run['skipped']}"}
    proc, run_dir = run["proc"], run["run_dir"]
    out = proc.stdout + proc.stderr
    if name == "slow storage":
        events = read_events(run_dir)
        inflight, max_inflight = 0, 0
        for e in events:
            if e["event"] == "ckpt_begin":
                inflight += 1
                max_inflight = max(max_inflight, inflight)
            elif e["event"] in ("ckpt_committed", "ckpt_failed"):
                inflight -= 1
        stalls = [e["stall_s"] for e in events if e["event"] == "ckpt_staged"]
        waits = [e.get("backpressure_s") or 0.0 for e in events if e["event"] == "ckpt_begin" and e["rank"] == 0]
        committed = sum(e["event"] == "ckpt_committed" for e in events)
        # Issue 48, item 8: each 1 s write outlasts the 5 steps to the next save, so a save waits for the one before
        ok = proc.returncode == 0 and max_inflight <= 1 and committed >= 1 and max(waits, default=0) >= SLOW_WAIT_S
        return {
            **cell,
            "ok": ok,
            "outcome": f"completed (exit {proc.returncode}); at most {max_inflight} save in flight; "
            f"{committed} committed; max back-pressure {max(waits, default=0):.2f} s (>= {SLOW_WAIT_S} s), max "
            f"loop stall {max(stalls, default=0):.2f} s",
        }
    cause = STORAGE_CAUSE.get(name, "likely cause: the file system is full")
    ok = proc.returncode == int(ExitCode.CHECKPOINT_WRITE) and cause in out
    line = _failure_line(proc, "FAILED")
    return {**cell, "ok": ok, "exit_code": proc.returncode, "outcome": f"exit {proc.returncode}: {line[:400]}"}


def _steps_after_last_launch(run_dir: Path) -> list[int]:
    """Steps trained by the run's last launch (after its ``launch`` event)."""
    events = read_events(run_dir)
    last = max(e["ts"] for e in events if e["event"] == "launch")
    return [e["step"] for e in events if e["event"] == "step" and e["ts"] > last]


def _failure_line(proc: subprocess.CompletedProcess[str], needle: str) -> str:
    """The first output line containing ``needle`` (else the last line), shortened for the table."""
    lines = (proc.stdout + proc.stderr).splitlines()
    return next((ln.strip() for ln in lines if needle in ln), lines[-1] if lines else "")[:400]


def _restore_failures(run_dir: Path) -> int:
    """Failed restores (rank 0's ``ckpt_failed`` events with ``op=restore``)."""
    events = read_events(run_dir)
    return sum(e["event"] == "ckpt_failed" and e.get("op") == "restore" and e["rank"] == 0 for e in events)


_FIRST_RUN_LOCK = threading.Lock()
_FIRST_RUN: dict[Path, subprocess.CompletedProcess[str]] = {}


def _committed_run(root: Path, name: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A copy, at ``root/name``, of one 10-step run that committed step 10 (run once, shared by the cells that then
    break its storage in their own ways)."""
    shared = root / "committed-10"
    with _FIRST_RUN_LOCK:  # once, even if it failed: a second run would empty the directory another cell is copying
        if root not in _FIRST_RUN:
            _FIRST_RUN[root] = local_run(shared, config=_config(), steps=10)
    shutil.copytree(shared, root / name)
    return _FIRST_RUN[root], root / name


def _cell_unreadable_marker(root: Path) -> dict[str, Any]:
    """The run committed step 10; on the next launch step_10/COMMITTED cannot be read (EISDIR, as an I/O error)."""
    first, run_dir = _committed_run(root, "unreadable-marker")
    ckpt = run_dir / "checkpoints" / step_dir_name(10)
    make_marker_unreadable(ckpt)
    files = sorted(p.name for p in ckpt.iterdir())
    second = local_run(run_dir, config=_config(), steps=20, fresh=False)
    trained, failures = _steps_after_last_launch(run_dir), _restore_failures(run_dir)
    kept = sorted(p.name for p in ckpt.iterdir()) == files
    line = _failure_line(second, "cannot read the commit marker")
    ok = (
        first.returncode == 0
        and second.returncode == int(ExitCode.CHECKPOINT_WRITE)
        and f"cannot read the commit marker {ckpt / COMMIT_MARKER}: EISDIR" in line
        and failures == MAX_REPEATS + 1
        and kept
        and not trained
    )
    outcome = (
        f"relaunch exit {second.returncode} after {failures} failed restores (in-process retries), trained "
        f"{len(trained)} steps, step_10/ {'kept whole' if kept else 'CHANGED'}: {line}"
    )
    return {"ok": ok, "outcome": outcome}


def _cell_missing_root(root: Path) -> dict[str, Any]:
    """The run committed; on the next launch its checkpoint directory is gone (a volume that did not mount)."""
    first, run_dir = _committed_run(root, "missing-root")
    shutil.rmtree(run_dir / "checkpoints")
    second = local_run(run_dir, config=_config(), steps=20, fresh=False)
    trained = _steps_after_last_launch(run_dir)
    line = _failure_line(second, "the checkpoint root")
    ok = (
        first.returncode == 0
        and second.returncode == int(ExitCode.CHECKPOINT_ROOT_MISSING)
        and "does not exist, but this run's event log" in line
        and not trained
    )
    outcome = f"relaunch exit {second.returncode}, trained {len(trained)} steps: {line}"
    return {"ok": ok, "outcome": outcome}


def _cell_dcp_storage_exception(root: Path) -> dict[str, Any]:
    """Every read inside dcp.load fails with EIO (DCP raises its CheckpointException, a BaseException) after a
    fault at step 7 made the ranks restore step 5."""
    run_dir = root / "dcp-storage-exception"
    env = child_env(TRAINING_CKPT_READ_ERROR="EIO")
    # storage only: with the memory tier the restart would restore step 5 from memory and never read storage
    config = _config(checkpoint={"memory_interval_steps": 0})
    proc = local_run(run_dir, config=config, steps=12, faults="exception@7:1", env=env)
    failures = _restore_failures(run_dir)
    line = _failure_line(proc, "EIO: Input/output error")
    ok = (
        proc.returncode == int(ExitCode.CHECKPOINT_WRITE)
        and failures == MAX_REPEATS + 1
        and "EIO: Input/output error" in line
        and (run_dir / "checkpoints" / step_dir_name(5)).is_dir()
    )
    return {"ok": ok, "outcome": f"exit {proc.returncode} after {failures} failed restores: {line}"}


def _cell_blocked_collective(root: Path) -> dict[str, Any]:
    """Rank 1 never joins the restore's checkpoint collective; the default group has the timeout it gets on CUDA."""
    out = blocked_restore(root / "blocked-collective")
    RAW["blocked checkpoint collective"] = out
    deadline_ms = f"Timed out waiting {out['checkpoint_deadline_s'] * 1000:.0f}ms"
    ok = deadline_ms in out["error"] and out["checkpoint_deadline_s"] < out["hard_timeout_s"]
    outcome = (
        f"rank 0 left after {out['left_after_s']} s ({deadline_ms}): checkpoint deadline gloo_timeout_s "
        f"{out['checkpoint_deadline_s']:g} s < hard timeout {out['hard_timeout_s']:g} s; default group "
        f"{out['default_group_timeout_s']:g} s (barrier_timeout_s, as on NCCL)"
    )
    return {"ok": ok, "outcome": outcome}


#: name -> runner; each returns ``ok`` and ``outcome`` for the "Checkpoint faults" table.
CHECKPOINT_CELLS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "unreadable commit marker": _cell_unreadable_marker,
    "checkpoint root missing": _cell_missing_root,
    "storage exception from DCP (load)": _cell_dcp_storage_exception,
    "blocked checkpoint collective": _cell_blocked_collective,
}


def _checkpoint_cell(name: str, root: Path) -> dict[str, Any]:
    return {"kind": "checkpoint", "phase": name, **CHECKPOINT_CELLS[name](root)}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    root = tmp_path_factory.mktemp("matrix")
    t0 = time.monotonic()
    # Three runs at a time: most of a run's wall time is spent waiting out fault-detection timeouts, not computing.
    with ThreadPoolExecutor(max_workers=3) as pool:
        kinds = [pool.submit(_kind_run, k, root) for k in KINDS]
        checkpoint = [pool.submit(_checkpoint_cell, n, root) for n in CHECKPOINT_CELLS]
        storage = [pool.submit(_storage_run, n, root) for n in STORAGE]
        nvrx = pool.submit(_nvrx_full_disk, root)
        kind_runs = dict(zip(KINDS, (f.result() for f in kinds), strict=True))
        cells = [c for k in KINDS for c in _evaluate_kind(k, kind_runs[k])]
        cells += [_evaluate_storage(f.result()) for f in storage] + [nvrx.result()]
        cells += [f.result() for f in checkpoint]
    for c in cells:  # paths relative to the matrix's temporary directory
        c["outcome"] = c["outcome"].replace(f"{root}/", "")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "total_wall_s": round(time.monotonic() - t0, 1),
                "runs": {
                    k: {"exit": r["proc"].returncode, "wall_s": round(r["wall_s"], 1)} for k, r in kind_runs.items()
                },
                "cells": cells,
            },
            indent=2,
        )
    )
    for k, r in kind_runs.items():
        if r["proc"].returncode != 0:
            print(f"--- {k} run output\n{r['proc'].stdout[-3000:]}\n{r['proc'].stderr[-3000:]}")
    return cells


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("phase", list(PHASES))
def test_fault_cell_recovered_by_intended_layer(matrix: list[dict[str, Any]], kind: str, phase: str) -> None:
    cell = next(c for c in matrix if c["kind"] == kind and c["phase"] == phase)
    assert cell["ok"], cell


@pytest.mark.parametrize("name", [*STORAGE, NVRX_FULL_DISK])
def test_storage_cell(matrix: list[dict[str, Any]], name: str) -> None:
    cell = next(c for c in matrix if c["kind"] == "storage" and c["phase"] == name)
    if cell["ok"] is None:
        pytest.skip(cell["outcome"])
    assert cell["ok"], cell


@pytest.mark.parametrize("name", list(CHECKPOINT_CELLS))
def test_checkpoint_cell(matrix: list[dict[str, Any]], name: str) -> None:
    cell = next(c for c in matrix if c["kind"] == "checkpoint" and c["phase"] == name)
    assert cell["ok"], cell


def test_a_rank_blocked_in_a_restore_collective_leaves_at_the_checkpoint_deadline(
    matrix: list[dict[str, Any]],
) -> None:
    """The blocked-collective cell's run, closer: the default group has the timeout it gets on CUDA (20 s locally,
    above the 8 s hard timeout); the restore's collective on the checkpoint group must still end after
    gloo_timeout_s (3 s), as gloo's own error says."""
    out = RAW["blocked checkpoint collective"]
    assert (out["checkpoint_deadline_s"], out["hard_timeout_s"], out["default_group_timeout_s"]) == (3.0, 8.0, 20.0)
    assert "Timed out waiting 3000ms" in out["error"], out
    assert classify(RuntimeError(out["error"])) == "peer_lost"  # blocked by its peer: not this rank's own fault


def test_a_full_disk_on_the_nvrx_path_names_its_cause_from_the_file_system(matrix: list[dict[str, Any]]) -> None:
    """The NVRx full-disk cell's run (a 512 KiB tmpfs), closer: the writer's failure and the file system's numbers."""
    if NVRX_FULL_DISK not in RAW:
        pytest.skip("needs root to mount a tmpfs")
    out, mnt = RAW[NVRX_FULL_DISK]["out"], RAW[NVRX_FULL_DISK]["mount"]
    assert "maybe_finalize raised: checkpoint at step 1 failed: RuntimeError: Worker failure: " in out
    cause = "likely cause: the file system is full (this rank's save needed 1.5 MiB)"
    assert f"{cause}; file system: 0 B free of 512 KiB at {mnt}" in out
