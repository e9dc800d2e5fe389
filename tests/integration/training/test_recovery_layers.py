"""Each fault kind is recovered by the intended layer (real processes, signals, NVRx on CPU/gloo).

The fault matrix covers exception / hang / oom -> in-process and sigkill -> ft_launcher in every phase, and
the determinism test covers comm -> in-process. Here: without the in-process layer (mode ``ft-launcher``)
ft_launcher recovers the soft faults too, with the cause taken from the persisted fault state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.training_runs import local_run
from training.telemetry.events import read_events

pytestmark = pytest.mark.integration


def test_ft_launcher_mode_recovers_exception_comm_and_hang(tmp_path: Path) -> None:
    proc = local_run(tmp_path / "ft", steps=24, faults="exception@5:1,comm@11:0,hang@17:1", mode="ft-launcher")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    events = read_events(tmp_path / "ft")
    begins = [e for e in events if e["event"] == "restart_begin" and e["rank"] == 0]
    assert [(e["layer"], e["cause"]) for e in begins] == [
        ("ft_launcher", "exception"),
        ("ft_launcher", "comm"),
        ("ft_launcher", "hang"),
    ]
    ends = [e for e in events if e["event"] == "restart_end" and e["rank"] == 0]
    assert [e["restart"] for e in ends] == [1, 2, 3]
    # fault_injected is written before the fault fires, and before the restart that follows it
    faults = [e for e in events if e["event"] == "fault_injected"]
    assert all(f["ts"] < b["ts"] for f, b in zip(faults, begins, strict=True))
    summary = json.loads((tmp_path / "ft" / "summary.json").read_text())
    assert summary["restarts_by_layer"] == {"inprocess": 0, "ft_launcher": 3, "job": 0}


def test_a_hang_on_the_only_rank_is_recovered_in_process(tmp_path: Path) -> None:
    """World size 1, a rank spinning in Python: no peer's collective times out, and NVRx's automatic progress timestamp
    keeps moving. The step pings' manual timestamp fires NVRx's soft timeout (before: ft_launcher, after its step
    section timeout)."""
    from platform_config import load_config

    proc = local_run(tmp_path / "ws1", steps=16, faults="hang@12:0", nproc=1)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "ws1" / "summary.json").read_text())
    assert summary["restarts_by_layer"] == {"inprocess": 1, "ft_launcher": 0, "job": 0}
    assert (
        "RankShouldRestart('Interruption.SOFT_TIMEOUT on ranks={0}')" in (tmp_path / "ws1" / "launcher.log").read_text()
    )
    events = read_events(tmp_path / "ws1")
    assert [e["resumed_step"] for e in events if e["event"] == "restart_end"] == [10]  # checkpoint every 5 steps
    ip = load_config().local.inprocess
    timeouts = [e for e in events if e["event"] == "hang_timeouts"]
    assert timeouts, "no derived step timeout before the hang"
    for e in timeouts:  # derived within [floor, ceiling]; the hard timeout keeps its distance to the soft one
        assert ip.step_timeout_floor_s <= e["soft_s"] <= ip.soft_timeout_s
        assert e["hard_s"] - e["soft_s"] == pytest.approx(ip.hard_timeout_s - ip.soft_timeout_s)
