"""The event log contract: record fields, append-only JSON lines, sinks, torn lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.telemetry.events import EVENT_TYPES, EventLog, read_events


def test_record_carries_clocks_rank_generation_and_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    monkeypatch.setenv("JOB_ATTEMPT", "1")
    log = EventLog(tmp_path, rank=3, layer="ft_launcher")
    log.iteration = 4
    rec = log.emit("step", step=7, loss=1.5, tokens=64, step_s=0.1)
    (line,) = (tmp_path / "events.jsonl").read_text().splitlines()
    assert json.loads(line) == rec
    assert (rec["rank"], rec["iteration"], rec["restart"], rec["attempt"]) == (3, 4, 2, 1)
    assert rec["layer"] == "ft_launcher" and rec["event"] == "step" and rec["step"] == 7
    assert rec["ts"] > 1e9 and rec["mono"] > 0


def test_emit_layer_overrides_the_default_layer(tmp_path: Path) -> None:
    rec = EventLog(tmp_path, rank=0, layer="ft_launcher").emit("restart_end", layer="inprocess", emit_layer="inprocess")
    assert rec["layer"] == "inprocess"


def test_unknown_event_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown event 'stepp'"):
        EventLog(tmp_path).emit("stepp")
    assert not (tmp_path / "events.jsonl").exists()


def test_sinks_see_every_written_record(tmp_path: Path) -> None:
    seen: list[dict] = []
    log = EventLog(tmp_path, rank=0)
    log.sinks.append(seen.append)
    a = log.emit("launch", launcher="torchrun", nproc=2, mode="k8s-only")
    b = log.emit("exit", reason="completed", code=0)
    assert seen == [a, b]


def test_read_events_orders_by_wall_clock_and_skips_a_torn_last_line(tmp_path: Path) -> None:
    log_a, log_b = EventLog(tmp_path, rank=0), EventLog(tmp_path, rank=1)
    first = log_a.emit("start", world_size=2, mode="inprocess", device="cpu")
    second = log_b.emit("start", world_size=2, mode="inprocess", device="cpu")
    with open(tmp_path / "events.jsonl", "a") as f:
        f.write('{"ts": 1, "event": "st')  # a writer killed mid-line
    assert read_events(tmp_path) == [first, second]


def test_every_layer_named_in_the_contract_is_known() -> None:
    assert {"start", "step", "ckpt_committed", "fault_injected", "restart_begin", "restore", "exit"} <= set(EVENT_TYPES)


def test_a_process_forked_into_another_uts_namespace_records_its_own_host_name(tmp_path: Path) -> None:
    """A warm pod's worker is forked from a template that imported this module on the host: its events must carry
    the pod's host name (the local cluster's runs said the machine's)."""
    import ctypes
    import os
    import socket

    if os.geteuid() != 0:
        pytest.skip("a UTS namespace of its own needs root")
    EventLog(tmp_path, rank=0).emit("exit", reason="completed", code=0)  # made in this process
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork: the child takes no loader lock
    pid = os.fork()
    if pid == 0:  # the child: a host name of its own, then the event
        code = 1
        try:
            if libc.unshare(0x04000000) == 0:  # CLONE_NEWUTS
                socket.sethostname("fsdp-train-0")
                EventLog(tmp_path, rank=1).emit("exit", reason="completed", code=0)
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    hosts = {e["rank"]: e["host"] for e in read_events(tmp_path)}
    assert hosts == {0: socket.gethostname(), 1: "fsdp-train-0"}
