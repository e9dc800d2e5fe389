"""The hang and start-up benchmarks' readings of a run directory, on hand-written files with known values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.hang import derived_timeouts, interruption
from benchmarks.startup import phases


def _events(run_dir: Path, events: list[dict]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    base = {"mono": 0.0, "rank": 0, "iteration": 0, "restart": 0, "attempt": 0, "relaunch": 0, "layer": "inprocess"}
    (run_dir / "events.jsonl").write_text("".join(json.dumps({**base, **e}) + "\n" for e in events))


def test_the_first_nvrx_interruption_and_the_last_derived_timeouts(tmp_path: Path) -> None:
    (tmp_path / "launcher.log").write_text(
        "rank=1 term_ex: RankShouldRestart('Interruption.SOFT_TIMEOUT on ranks={0, 1}')\n"
        "rank=0 term_ex: RankShouldRestart('Interruption.EXCEPTION on ranks={0}')\n"
    )
    _events(
        tmp_path,
        [
            {"ts": 1.0, "event": "hang_timeouts", "soft_s": 2.0, "hard_s": 6.0, "step_s": 0.1},
            {"ts": 2.0, "event": "hang_timeouts", "soft_s": 3.5, "hard_s": 7.5, "step_s": 0.35},
        ],
    )
    assert interruption(tmp_path) == "SOFT_TIMEOUT (ranks 0, 1)"
    assert derived_timeouts(tmp_path) == (3.5, 7.5)
    assert interruption(tmp_path / "none") == "-"


def test_the_interruption_as_nvrx_070_writes_it(tmp_path: Path) -> None:
    """NVRx 0.7.0's wording (a line of the launcher log of a 2 x H200 run, 2026-11-30)."""
    (tmp_path / "launcher.log").write_text(
        "2026-11-30 23:55:22,307 [WARNING] [vm] [workload:1(1) infra:?(?)] wrap.py:598 [2026-11-30 23:55:22.307424] "
        "rank=1 term_ex: RankShouldRestart('Interruption.EXCEPTION affecting ranks {0}')\n"
    )
    assert interruption(tmp_path) == "EXCEPTION (ranks 0)"


def test_start_up_phases_take_the_slowest_rank_and_count_from_the_launch(tmp_path: Path) -> None:
    phase = [
        ("imports", 0, 4.0, 101.0),
        ("imports", 1, 5.0, 101.5),
        ("wrapper", 0, 1.0, None),
        ("model", 1, 0.5, None),
    ]
    events = [{"ts": 100.0, "rank": -1, "layer": "job", "event": "launch", "launcher": "ft_launcher", "nproc": 2}]
    for name, rank, s, start in phase:
        events.append({"ts": 110.0, "rank": rank, "event": "phase", "phase": name, "s": s, "start_ts": start})
    events.append({"ts": 111.0, "rank": 0, "iteration": 1, "event": "phase", "phase": "model", "s": 0.05})
    events.append({"ts": 112.5, "rank": 0, "event": "step", "step": 1, "loss": 3.0, "tokens": 8, "step_s": 0.1})
    _events(tmp_path, events)
    got = phases(tmp_path)
    assert got[0] == pytest.approx({"imports": 5.0, "wrapper": 1.0, "model": 0.5, "launcher": 1.0, "total": 12.5})
    assert got[1] == {"model": 0.05}  # no fault in this log: no recovery time
