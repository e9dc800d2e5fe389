"""Readying a rank's memory-tier host slots (``training.checkpoint.host_slots``), on the CPU (nothing to page-lock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.checkpoint import host_slots
from training.checkpoint.host_slots import HostSlots
from training.telemetry.events import EventLog, read_events


def test_both_slots_are_mapped_then_timed_in_the_log_and_an_event(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    calls: list[str] = []
    slots = HostSlots(
        tmp_path / "shm", 0, EventLog(tmp_path, rank=0), before=lambda: calls.append("before"), report=print
    )
    (tmp_path / "shm").mkdir()
    assert not slots.started and not slots.ready(lambda v: v)
    slots.start(4096, "copied on the CPU", wait=True)
    assert calls == ["before"]
    assert sorted(p.name for p in (tmp_path / "shm").iterdir()) == ["owner0.slot0.bin", "owner0.slot1.bin"]
    assert all(p.stat().st_size == 4096 for p in (tmp_path / "shm").iterdir())
    line = capsys.readouterr().out
    assert "memory tier: 0.00 GiB a snapshot, copied on the CPU; host slots mapped after the first step in " in line
    assert "page-locked 0.00 s in 0 pieces" in line
    (event,) = [e for e in read_events(tmp_path) if e["event"] == "mem_prepare"]
    assert event["nbytes"] == 4096 and event["reserve_s"] > 0 and event["s"] >= event["reserve_s"]
    assert event["early"] is False
    assert slots.ready(lambda v: v)


def test_a_rank_whose_slots_are_not_ready_holds_every_rank_back(tmp_path: Path) -> None:
    (tmp_path / "shm").mkdir()
    slots = HostSlots(tmp_path / "shm", 1, EventLog(tmp_path, rank=1), before=lambda: None, report=print)
    slots.start(4096, "", wait=True)
    assert not slots.ready(lambda v: [1.0])  # another rank is still mapping
    assert slots.ready(lambda v: v)
    assert not (tmp_path / "events.jsonl").exists()  # the event is rank 0's only


def test_slots_that_cannot_be_mapped_are_reported(tmp_path: Path) -> None:
    reported: list[tuple[int, str]] = []
    slots = HostSlots(
        tmp_path / "missing", 0, EventLog(tmp_path, rank=0), before=lambda: None, report=lambda *a: reported.append(a)
    )
    slots.start(4096, "", wait=True)
    assert len(reported) == 1 and reported[0][0] == 0
    assert reported[0][1].startswith(f"no host memory for the snapshots (4096 bytes in {tmp_path / 'missing'}): ")


def test_slots_begun_at_start_up_are_adopted_and_not_mapped_again(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    events = EventLog(tmp_path, rank=0)
    host_slots.begin(tmp_path / "shm", 0, 8192, events)  # the directory is made
    calls: list[str] = []
    slots = host_slots.adopt(tmp_path / "shm", 0, events, report=print, before=lambda: calls.append("before"))
    slots.start(4096, "copied on the CPU", wait=True)  # smaller than begun: the same files
    assert calls == ["before"]
    assert all(p.stat().st_size == 8192 for p in (tmp_path / "shm").iterdir())
    assert "host slots mapped at start-up (8192 bytes) in " in capsys.readouterr().out
    (event,) = [e for e in read_events(tmp_path) if e["event"] == "mem_prepare"]
    assert event["early"] is True and event["nbytes"] == 4096
    assert host_slots.adopt(tmp_path / "shm", 0, events, report=print, before=lambda: None) is not slots  # taken


def test_slots_begun_too_small_are_mapped_again_after_the_first_step(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    events = EventLog(tmp_path, rank=0)
    host_slots.begin(tmp_path / "shm", 0, 1024, events)
    slots = host_slots.adopt(tmp_path / "shm", 0, events, report=print, before=lambda: None)
    slots.start(4096, "", wait=True)
    assert all(p.stat().st_size == 4096 for p in (tmp_path / "shm").iterdir())
    assert "again after the first step (the 1024 bytes readied at start-up were too few) in " in capsys.readouterr().out
    (event,) = [e for e in read_events(tmp_path) if e["event"] == "mem_prepare"]
    assert event["early"] is False


def test_slots_whose_start_up_readying_failed_are_mapped_after_the_first_step(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    events = EventLog(tmp_path, rank=0)
    blocker = tmp_path / "shm" / "owner0.slot0.bin"
    blocker.mkdir(parents=True)  # a directory where the slot's file goes: the start-up readying fails
    host_slots.begin(tmp_path / "shm", 0, 4096, events)
    host_slots._BEGUN[(tmp_path / "shm", 0)]._begun[0].join()  # type: ignore[index]  # failed before it is adopted
    slots = host_slots.adopt(tmp_path / "shm", 0, events, report=print, before=lambda: None)
    assert "rank 0: readying the memory tier at start-up: no host memory for the snapshots" in capsys.readouterr().out
    blocker.rmdir()
    slots.start(4096, "", wait=True)
    assert "host slots mapped after the first step (readying them at start-up failed) in " in capsys.readouterr().out
    assert all(p.stat().st_size == 4096 for p in (tmp_path / "shm").iterdir())
