"""Shared plumbing of the benchmark scripts: run ``training.local`` with config overrides, read its results."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

from training.launch.prefork import SOCKET_ENV
from training.telemetry.goodput import analyze, load_events

REPO = Path(__file__).resolve().parents[1]


def run_local(
    run_dir: Path,
    *,
    mode: str,
    steps: int,
    faults: str,
    nproc: int,
    overrides: dict[str, Any] | None = None,
    port: int = 29800,
    timeout_s: float = 600,
    nodes: int | None = None,
    node_replace_s: float = 5.0,
) -> tuple[int, str]:
    """One ``python -m training.local`` run (output streamed to ``run_dir``.log); returns (exit code, log path).

    ``nodes``: run the training Job's manifests as that many local pods (``--nodes``; each pod has a network of its
    own, so ``port`` is unused), a node loss replaced after ``node_replace_s``."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    cfg_path = run_dir.parent / f"{run_dir.name}.project.yaml"
    cfg_path.write_text(yaml.safe_dump(overrides or {}))
    log = run_dir.parent / f"{run_dir.name}.log"
    cmd = [sys.executable, "-m", "training.local", "--run-dir", str(run_dir), "--config", str(cfg_path), "--fresh"]
    cmd += ["--mode", mode, "--steps", str(steps), "--faults", faults, "--nproc", str(nproc)]
    cmd += ["--progress-every", str(max(steps // 4, 1))]
    if nodes is None:
        cmd += ["--port", str(port), "--store-port", str(port + 1)]
    else:
        cmd += ["--nodes", str(nodes), "--node-replace-s", f"{node_replace_s:g}"]
    print(f"-- {run_dir.name}: {' '.join(cmd[1:])}", flush=True)
    with open(log, "w") as f:
        rc = _run_group(cmd, f, timeout_s)
    if rc:
        print(f"   FAILED (exit {rc}); see {log}", flush=True)
    return rc, str(log)


class _Terminated(BaseException):
    """SIGTERM reached the benchmark (an outer ``timeout``): its run must not outlive it."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


def _run_group(cmd: list[str], out: Any, timeout_s: float) -> int:
    """Run ``cmd`` in a process group of its own; at the timeout, or when this process is stopped, the whole group is
    stopped (exit 124 for the timeout). Killing only ``training.local`` left its launcher and workers running: on the
    GPU machine they slowed the next benchmark by a third (2 x H200, 2026-11-30)."""
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=os.environ, start_new_session=True)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        return 124
    except BaseException:
        stop_group(proc)
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def torchrun_command(nproc: int, module: str, args: list[str]) -> tuple[list[str], str]:
    """``python -m torch.distributed.run --standalone`` of ``nproc`` workers running ``python -m MODULE ARGS``, and
    what to print about how they start. With a worker template's socket in the environment (``SOCKET_ENV``: the test
    suite's), torchrun and the workers are forked from it, as in a pod (``job.prefork_workers``): the note names it;
    else they start as plain processes (the note is empty)."""
    socket = os.environ.get(SOCKET_ENV)
    warm = ["-m", "training.launch.prefork", "run"] if socket else ["-m"]
    cmd = [sys.executable, *warm, "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    note = f" (torchrun and workers forked from the template at {socket})" if socket else ""
    return [*cmd, *warm, module, *args], note


def call_torchrun(cmd: list[str], env: dict[str, str], timeout_s: float | None = None) -> int:
    """``subprocess.call`` of a ``torchrun`` command line from the repository root, in a TMPDIR of its own removed
    after it, as a pod's /tmp: torchrun never removes its ``torchelastic_*`` directory. Raises
    :class:`subprocess.TimeoutExpired` past ``timeout_s``."""
    with tempfile.TemporaryDirectory(prefix="torchrun-", ignore_cleanup_errors=True) as tmp:
        return subprocess.call(cmd, cwd=REPO, env={**env, "TMPDIR": tmp}, timeout=timeout_s)


def stop_group(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM ``proc``'s process group (``training.local`` then stops its launcher, or its pods), SIGKILL what is
    left after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def report(run_dir: Path) -> dict[str, Any]:
    """``report.json``-style analysis of a finished run."""
    return analyze(load_events(run_dir).events).to_json()


def step_throughput(run_dir: Path, warmup: int) -> float | None:
    """Optimizer steps per second over the steps after ``warmup`` (first execution of each, rank 0's events)."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    steps = sorted((e["ts"], e["step"]) for e in events if e["event"] == "step" and e["step"] > warmup)
    if len(steps) < 2:
        return None
    return (steps[-1][1] - steps[0][1]) / (steps[-1][0] - steps[0][0])


def worker_count(nproc: int | None) -> int:
    """What :func:`workers` will choose, without importing torch (for a command line's checks)."""
    from training.common.gpus import cuda_device_count

    return nproc or cuda_device_count() or 2


def schedule_lines(flag: str, spec: str, steps: Any, nproc: Any) -> list[str]:
    """The entries of the fault schedule ``spec`` (named ``flag`` in the message) that are malformed or would never
    fire in a run of ``steps`` steps on ``nproc`` workers (None: :func:`worker_count`'s); none while ``--steps`` or
    ``--nproc`` is refused itself."""
    from training.common.arguments import Rejected
    from training.resilience.faults import RunShape, schedule_problems

    if isinstance(steps, Rejected) or isinstance(nproc, Rejected):
        return []
    world = worker_count(nproc)
    where = f" (--nproc {world})" if nproc else f" (GPUs if CUDA, else 2: {world})"
    return [f"{flag} {line}" for line in schedule_problems(spec, RunShape(steps, world, world=where))]


def workers(nproc: int | None) -> tuple[int, str]:
    """(worker count, a description of the devices): one worker per GPU with CUDA, else 2 CPU workers."""
    import torch

    if torch.cuda.is_available():
        n = nproc or torch.cuda.device_count()
        return n, f"{n} x {torch.cuda.get_device_name(0)} (NCCL, bf16)"
    n = nproc or 2
    return n, f"{n} CPU workers (gloo, fp32: the CPU fallback)"


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)
