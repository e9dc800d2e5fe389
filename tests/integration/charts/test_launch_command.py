"""The container's supervisor script run for real: torchrun and ft_launcher (installed NVRx) on CPU.

One node with two workers; ``launch_payload`` stands in for the training. Checks that ranks and world size
come out as planned, that a worker's unrecoverable exit code becomes the pod's exit code, and what the supervisor
does with an ordinary failure: under torchrun the worker's own code ends the pod; under ft_launcher a fresh launcher
follows while the windowed relaunch budget holds its failures. The module's six supervisor runs go three at a time
(:func:`supervisor_runs`): they mostly wait on their launchers, and each has its own ports and node files. The
supervisor of every run but :data:`COLD`'s has its worker template forked from the test process's (as a warm pod's).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from charts.launch_command import NodeFiles, supervisor_script
from charts.names import run_dir
from charts.topology import Topology
from platform_config import RecoveryMode, config_from_dict
from tests.helpers.training_runs import free_port, shared_template
from training.launch.prefork import ZYGOTE_ENV

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
PAYLOAD = "tests.integration.charts.launch_payload"


def _run(tmp_path: Path, mode: RecoveryMode, fail_rank: int | None = None, exit_code: int = 0, *, warm: bool = True):
    port = free_port()
    cfg = config_from_dict(
        {
            "storage": {"mount_path": str(tmp_path / "fsx")},
            "gpu_nodes": {"node_count": 1, "min_nodes": 0, "max_nodes": 2},
            "image": {"nvrx_version": "0.4.1"},  # what requirements.txt installs here
            "job": {
                "rendezvous_port": port,
                "inprocess_store_port": free_port(),
                "relaunch": {"max_in_window": 5, "window_s": 600, "delay_s": 0},
            },
            "ft": {"max_restarts": 3},
            "faults": {"schedule": "exception@5:1"},
        }
    )
    topo = Topology(nodes=1, instance=dataclasses.replace(cfg.instance, gpus=2))
    files = NodeFiles.under(tmp_path)
    script = supervisor_script(cfg, mode, topo, host="127.0.0.1", module=PAYLOAD, files=files)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "JOB_COMPLETION_INDEX": "0",
        "PAYLOAD_FAIL_RANK": "" if fail_rank is None else str(fail_rank),
        "PAYLOAD_EXIT_CODE": str(exit_code),
    }
    if warm:  # the supervisor's template is forked from this test process's, as a warm pod's (training.local)
        env[ZYGOTE_ENV] = shared_template()
    with tempfile.TemporaryDirectory(prefix="pod-tmp-") as pod_tmp:  # the container's own /tmp (a short path:
        env["TMPDIR"] = pod_tmp  # the launchers' AF_UNIX sockets go there), gone with the pod
        proc = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    records = {}
    for path in Path(run_dir(cfg, mode)).glob("rank-*.jsonl"):
        records[path.name] = [json.loads(line) for line in path.read_text().splitlines()]
    return cfg, proc, records


#: The module's supervisor runs: (test, mode) -> (failing rank, its exit code).
RUNS: dict[tuple[str, RecoveryMode], tuple[int | None, int]] = {
    ("success", RecoveryMode.K8S_ONLY): (None, 0),
    ("success", RecoveryMode.FT_LAUNCHER): (None, 0),
    ("unrecoverable", RecoveryMode.SYNC_CKPT): (1, 42),
    ("unrecoverable", RecoveryMode.INPROCESS_FT): (1, 42),
    ("ordinary", RecoveryMode.ASYNC_CKPT): (0, 3),
    ("ordinary", RecoveryMode.FT_LAUNCHER): (0, 3),
}
#: The run whose supervisor starts a template that imports the training code itself, as a pod's does; the others
#: have theirs forked from the test process's (the supervisor script is the same; 3-4 CPU-s of imports a run less).
COLD = {("success", RecoveryMode.K8S_ONLY)}


@pytest.fixture(scope="module")
def supervisor_runs(tmp_path_factory: pytest.TempPathFactory):
    """Every run of :data:`RUNS`, three at a time, each in a directory of its own; (test, mode) -> the future of
    :func:`_run`'s result (a run that raised fails only its own test). The longest (ft_launcher relaunched after an
    ordinary failure) starts first."""
    order = sorted(RUNS, key=lambda k: k != ("ordinary", RecoveryMode.FT_LAUNCHER))
    with ThreadPoolExecutor(max_workers=3) as pool:
        yield {
            key: pool.submit(
                _run, tmp_path_factory.mktemp(f"{key[0]}-{key[1].value}"), key[1], *RUNS[key], warm=key not in COLD
            )
            for key in order
        }


@pytest.mark.parametrize("mode", [RecoveryMode.K8S_ONLY, RecoveryMode.FT_LAUNCHER])
def test_success_gives_planned_ranks(supervisor_runs, mode):
    _, proc, records = supervisor_runs["success", mode].result()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(records) == ["rank-0.jsonl", "rank-1.jsonl"]
    for name, (rec,) in records.items():
        assert rec["RANK"] == name.removeprefix("rank-").removesuffix(".jsonl")
        assert rec["WORLD_SIZE"] == "2" and rec["GROUP_RANK"] == "0"
        assert rec["mode"] == mode.value and rec["faults"] == "exception@5:1"


@pytest.mark.parametrize("mode", [RecoveryMode.SYNC_CKPT, RecoveryMode.INPROCESS_FT])
def test_unrecoverable_exit_reaches_the_pod(supervisor_runs, mode):
    cfg, proc, records = supervisor_runs["unrecoverable", mode].result()
    assert cfg.ft.unrecoverable_exit_code == 42
    assert proc.returncode == 42, proc.stdout + proc.stderr
    # ft_launcher is stopped instead of restarting the group up to max_restarts (3) times
    assert len(records["rank-1.jsonl"]) < 1 + cfg.ft.max_restarts


@pytest.mark.parametrize("mode", [RecoveryMode.ASYNC_CKPT, RecoveryMode.FT_LAUNCHER])
def test_an_ordinary_failure_ends_the_pod_with_the_workers_code(supervisor_runs, mode):
    cfg, proc, records = supervisor_runs["ordinary", mode].result()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out  # Kubernetes counts it and replaces the pod; never the unrecoverable 42
    if mode is RecoveryMode.FT_LAUNCHER:
        # Launch 1: 1 + max_restarts (3) failures, charged 4 + 1 <= budget 5 -> a fresh launcher. Launch 2: 4 more
        # failures would exceed the window's budget -> the pod ends.
        assert len(records["rank-0.jsonl"]) == 2 * (1 + cfg.ft.max_restarts)
        assert "after the launcher's restarts were used up" in out and "too often for a relaunch" in out
    else:
        assert len(records["rank-0.jsonl"]) == 1
        assert "local rank 0 failed with 3: Kubernetes replaces this pod" in out


def test_warm_supervisors_fork_their_template_and_the_cold_one_imports_it(supervisor_runs):
    for key, future in supervisor_runs.items():
        _, proc, _ = future.result()
        out = proc.stdout + proc.stderr
        assert "[prefork] template " in out, (key, out[-2000:])
        assert ("forked into this pod from the template at" in out) == (key not in COLD), (key, out[-2000:])
