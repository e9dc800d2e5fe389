"""NVRx's in-process monitor daemon must not hold the worker's connection to ft_launcher's rank monitor.

NVRx forks that daemon (double fork, new session) when a worker enters the in-process Wrapper, and a fork copies
every open descriptor. A rank-monitor connection opened before the fork was therefore held by two processes, and
stayed open after the worker died (seen here with ``ss -xp``). The worker now connects inside the Wrapper.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.training_runs import local_run

pytestmark = pytest.mark.integration


def _processes() -> dict[int, tuple[int, str, set[str], set[str]]]:
    """pid -> (parent pid, command line, open sockets, other open files) of every process."""
    found: dict[int, tuple[int, str, set[str], set[str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            sockets, files = set(), set()
            for fd in os.listdir(f"/proc/{entry}/fd"):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                (sockets if target.startswith("socket:") else files).add(target)
        except OSError:  # the process ended meanwhile
            continue
        found[int(entry)] = (ppid, cmdline, sockets, files)
    return found


def _worker_pids(run_dir: Path) -> set[int]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return {e["pid"] for e in events if e["event"] == "start" and e["rank"] >= 0}


def _steps_logged(run_dir: Path) -> int:
    events = run_dir / "events.jsonl"
    if not events.exists():
        return 0
    steps = [json.loads(line) for line in events.read_text().splitlines() if '"event":"step"' in line]
    return len(steps)


def test_the_nvrx_monitor_daemon_holds_no_socket_of_its_worker(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result: dict[str, object] = {}
    # 60 steps of ~40 ms: the processes are inspected once 3 steps are logged, which leaves about 2 s of training
    # (and the run's checkpoint saves) in which the workers and daemons are alive.
    run = lambda: result.update(proc=local_run(run_dir, steps=60))  # noqa: E731
    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 120
    while _steps_logged(run_dir) < 3 and runner.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert runner.is_alive(), "the run ended before its processes could be inspected"
    assert _steps_logged(run_dir) >= 3, "the run made no progress"
    procs = _processes()
    # The workers and the launcher are forks of the test process's worker template (training.launch.prefork), which
    # other tests' runs fork from too, so they, the launcher's rank monitors and the NVRx daemons the workers fork
    # carry the template's command line; this run's hold a file of its run directory open (the launcher's log, the
    # daemons' own logs). The daemons are orphaned (double fork, new session): none of those, nor a child of one.
    in_run = {pid for pid, info in procs.items() if any(f.startswith(f"{run_dir}/") for f in info[3])}
    workers = _worker_pids(run_dir)
    assert len(workers) == 2 and workers <= procs.keys(), workers
    templates = {procs[w][0] for w in workers}
    assert len(templates) == 1, f"the workers have different parents: {templates}"
    (template,) = templates
    # The launcher is forked from the template too (as this run's training.local is): the parent of the workers'
    # stand-ins (``prefork run training.train``); its rank monitors are its own forks.
    stand_ins = {pid for pid in in_run if procs[pid][1].partition("prefork run ")[2].startswith("training.train ")}
    launchers = {procs[pid][0] for pid in stand_ins}
    assert len(launchers) == 1, f"expected one launcher of the workers' stand-ins, found {sorted(launchers)}"
    assert procs[next(iter(launchers))][0] == template, "the launcher is not forked from the workers' template"
    ours = workers | templates | launchers
    command = procs[template][1]
    daemons = {
        pid: info
        for pid, info in procs.items()
        if pid in in_run and info[1] == command and ours.isdisjoint((pid, info[0]))
    }
    assert len(daemons) == 2, f"expected one NVRx monitor daemon per worker, found {sorted(daemons)}"
    shared = {
        (worker, daemon): sorted(procs[worker][2] & d_socks)
        for worker in workers
        for daemon, (_, _, d_socks, _) in daemons.items()
        if procs[worker][2] & d_socks
    }
    assert not shared, f"sockets held by a worker and an NVRx monitor daemon: {shared}"
    runner.join(timeout=180)
    proc = result.get("proc")
    assert proc is not None and proc.returncode == 0, getattr(proc, "stdout", "")[-3000:]
