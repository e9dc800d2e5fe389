"""The cause a restarted rank reports: the newest fault fired after that rank last entered training, a rank's own
or a node fault the local cluster's controller fired; a fault an earlier restart already recovered is never it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from platform_config.schema import MODE_LAYERS, RecoveryMode
from training.common.files import atomic_write_json
from training.resilience.exit_codes import write_exit_status
from training.resilience.restarts import (
    newest_fault_since,
    previous_start_ns,
    record_entry,
    record_node_fault,
    restart_layer,
)


@pytest.fixture(autouse=True)
def _no_launcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TORCHELASTIC_RESTART_COUNT", "POD_LAUNCH_NS", "JOB_ATTEMPT", "POD_RELAUNCH"):
        monkeypatch.delenv(name, raising=False)


def test_a_node_fault_is_the_cause_when_it_is_the_newest(tmp_path: Path) -> None:
    (tmp_path / "faults").mkdir()
    atomic_write_json(tmp_path / "faults" / "fired.rank2.json", {"exception@70:2/step": 700})
    record_node_fault(tmp_path, "node-loss@40:1", 400)
    record_node_fault(tmp_path, "node-loss@100:0", 1000)
    assert newest_fault_since(tmp_path, 0) == "node-loss"
    assert newest_fault_since(tmp_path, 800) == "node-loss"
    assert newest_fault_since(tmp_path, 500) == "node-loss"  # 1000 is newer than the exception's 700
    assert newest_fault_since(tmp_path, 1000) is None


def test_an_in_process_recovery_moves_the_next_process_s_horizon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report of 2026-12-01: after node-loss@100:0 the replacement of rank 0 said ``exception`` (the exception at step
    70 that rank 0 had already recovered in-process). Rank 0's record now holds its re-entry after that recovery."""
    assert previous_start_ns(tmp_path, 0) == 0  # the first process of rank 0 (records its start)
    atomic_write_json(tmp_path / "faults" / "fired.rank2.json", {"exception@70:2/step": 700})
    record_entry(tmp_path, 0, 750)  # rank 0 re-entered after the in-process restart
    entered = previous_start_ns(tmp_path, 0)  # the replacement pod's rank 0
    assert entered == 750
    layers = MODE_LAYERS[RecoveryMode("inprocess-ft")]
    monkeypatch.setenv("JOB_ATTEMPT", "1")
    monkeypatch.setenv("POD_LAUNCH_NS", "900")
    assert restart_layer(layers, tmp_path, entered, 0, None) == ("job", "pod_failure")
    record_node_fault(tmp_path, "node-loss@100:0", 800)
    assert restart_layer(layers, tmp_path, entered, 0, None) == ("job", "node-loss")


@pytest.mark.parametrize(
    ("cause", "expected"), [("checkpoint_write", "checkpoint_write"), ("peer_lost", "worker_failure")]
)
def test_an_ft_launcher_restart_names_the_cause_a_worker_recorded(tmp_path, monkeypatch, cause, expected) -> None:
    """No injected fault: the cause is what a worker of the launch recorded at its exit after this rank's last entry
    (a survivor's ``peer_lost`` says nothing of the rank that failed); an older record is another restart's."""
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    write_exit_status(tmp_path, 21, cause, "the save of step 8 did not finish within 27 s", 1)
    layers = MODE_LAYERS[RecoveryMode.FT_LAUNCHER]
    assert restart_layer(layers, tmp_path, 500, 0, None) == ("ft_launcher", expected)
    assert restart_layer(layers, tmp_path, time.time_ns() + 10**9, 0, None) == ("ft_launcher", "worker_failure")
