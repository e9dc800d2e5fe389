"""``python -m training.local``: the demo CLI reaches its target, shows progress, fails loudly otherwise."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from platform_config import load_config
from tests.helpers.training_runs import FAST_CONFIG, REPO_ROOT, SUITE_TEMPLATE_ENV, local_run
from tests.helpers.training_runs import test_env as child_env
from training.telemetry.events import read_events

pytestmark = pytest.mark.integration


def test_repeated_fault_escalates_to_unrecoverable_exit(tmp_path: Path) -> None:
    """A sticky fault (fires after every recovery) exceeds faults.max_repeats: exit with the unrecoverable code."""
    cfg = copy.deepcopy(FAST_CONFIG)
    cfg["faults"] = {"max_repeats": 1}
    proc = local_run(tmp_path / "sticky", config=cfg, steps=12, faults="exception@3:1!")
    assert proc.returncode == load_config().ft.unrecoverable_exit_code, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAILED" in proc.stderr and "target step 12 not reached" in proc.stderr
    assert "faults.max_repeats=1" in proc.stderr
    # the exiting rank asked ft_launcher (forked from the tests' template) to stop: it closed the rendezvous instead
    # of restarting the workers until its restarts ran out (3 more restarts while the request found no socket)
    log = (tmp_path / "sticky" / "launcher.log").read_text()
    assert "req=WorkloadControlRequest(action=WorkloadAction.ShutdownWorkload" in log
    assert "shutdown request failed" not in log
    assert log.count("will restart worker group") <= 1  # one may start before the request is read


def test_k8s_only_fault_exits_with_cause_code_and_pod_restart_recovers(tmp_path: Path) -> None:
    """k8s-only: the fault ends the launch with the cause's code; the emulated pod restart (JOB_ATTEMPT+1) resumes."""
    proc = local_run(tmp_path / "k8s", steps=12, faults="exception@7:1", mode="k8s-only", own_template=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rank 1 exited with code 10 (exception)" in proc.stdout
    assert "JOB   pod restart (attempt 1)" in proc.stdout
    summary = json.loads((tmp_path / "k8s" / "summary.json").read_text())
    assert summary["restarts_by_layer"]["job"] == 1 and summary["final_step"] == 12
    # the published baseline has no memory tier: the restart after step 7 restores step 5's storage checkpoint
    events = read_events(tmp_path / "k8s")
    assert not [e for e in events if e["event"] == "mem_snapshot"]
    restores = [(e["from_step"], e["tier"]) for e in events if e["event"] == "restore"]
    assert restores == [(0, "none"), (5, "storage")], restores
    # as in a pod, each launch (attempt) started its own template, which forked the launcher and the workers
    log = (tmp_path / "k8s" / "launcher.log").read_text()
    assert log.count("[prefork] template ") == 2 and "cold start" not in log and "caller's template" not in log


def test_a_run_forks_from_the_callers_template_when_given_one(tmp_path: Path) -> None:
    """``--template``: the test suite's template forks every launch's launcher and workers; the run starts none.
    Under xdist that is the one template of the whole run (tests/helpers/suite_template.py)."""
    proc = local_run(tmp_path / "shared", steps=6)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (tmp_path / "shared" / "launcher.log").read_text()
    assert "== attempt 0 (forked from the caller's template at /tmp/training-prefork-tests-" in log
    suite = os.environ.get(SUITE_TEMPLATE_ENV, "").partition(":")[2]  # under xdist: the controller's, for every worker
    assert not suite or f"forked from the caller's template at {suite})" in log
    assert "[prefork] template " not in log and "cold start" not in log
    # the launcher, forked from a template that imported it with the machine's /tmp, kept its files (sockets,
    # torchelastic's log directory) in the launch's own TMPDIR, which went with the launch
    (log_dir,) = re.findall(r"log_dir\s+: (\S+)", log)
    launch_tmp = Path(log_dir).parent
    assert re.fullmatch(r"training-local-\d+a0-\w+", launch_tmp.name), log_dir
    assert not launch_tmp.exists()


def test_runs_started_from_several_threads_share_one_template() -> None:
    """A fixture's thread pool asks for the test process's own template (no suite template) from several threads at
    once: one template starts, not one per thread (three did, and two of them outlived the suite)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.helpers import training_runs

    for old in training_runs._SHARED_TEMPLATE:  # start from none, as a fixture's first runs do
        old.terminate()
        old.wait(timeout=30)
    with ThreadPoolExecutor(4) as pool:
        paths = set(pool.map(lambda _: training_runs.own_template(), range(4)))
    (path,) = paths
    command = f"prefork serve --socket {path}"  # what its forks (workers, launchers) show too: count their roots
    serving = {p.name for p in Path("/proc").glob("[0-9]*") if _cmdline(p).endswith(command)}
    roots = [pid for pid in serving if _ppid(pid) not in serving]
    assert len(roots) == 1, [_cmdline(Path("/proc", pid)) for pid in roots]
    if os.environ.get(training_runs.SUITE_TEMPLATE_ENV):  # the other runs here fork from the suite's: stop this one
        for template in training_runs._SHARED_TEMPLATE:
            training_runs.stop_template(template, path)


def _ppid(pid: str) -> str:
    try:
        return (Path("/proc", pid, "stat").read_text().rsplit(")", 1)[1].split() or ["", ""])[1]
    except OSError:
        return ""


def _cmdline(proc_dir: Path) -> str:
    try:
        return (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:  # ended meanwhile
        return ""


def _module(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` from the repository (a bad command line: it ends at once)."""
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO_ROOT, env=child_env(), capture_output=True, text=True, timeout=120
    )


def test_bad_fault_spec_is_rejected() -> None:
    proc = _module("training.train", "--run-dir", "/tmp/unused-h4", "--faults", "explode@3")
    assert proc.returncode == 2 and "kind must be one of" in proc.stderr
