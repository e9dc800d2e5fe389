"""CheckpointManager on a real one-rank gloo group: commit, restore, integrity, retention, storage faults."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import threading
from pathlib import Path

import pytest

from tests.helpers.flaky_storage import failing_hashes
from tests.helpers.training_runs import (
    finished_write,
    make_marker_unreadable,
    restore_marker,
    single_process_group,
    small_tmpfs,
    tiny_app_state,
    tiny_train_step,
)
from training.checkpoint.backends import InFlight
from training.checkpoint.errors import (
    CheckpointReadError,
    CheckpointRootMissingError,
    CheckpointWriteError,
    NoUsableCheckpointError,
)
from training.checkpoint.files import (
    COMMIT_MARKER,
    QUARANTINE_DIR,
    file_checksums,
    hash_shares,
    list_committed,
    list_step_dirs,
    read_marker,
    step_dir_name,
    storage_layout_error,
    verify_checkpoint,
)
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.state import state_digest
from training.resilience.exit_codes import classify
from training.telemetry.events import EventLog, read_events

#: Deadline of the checkpoint group's collectives in these one-rank tests (never reached).
TIMEOUT_S = 10.0


@pytest.fixture(autouse=True)
def _group():
    with single_process_group():
        yield


def _manager(root: Path, mode: str = "sync", keep_last: int = 5, **kw) -> CheckpointManager:
    kw.setdefault("collective_timeout_s", TIMEOUT_S)
    return CheckpointManager(root, mode, keep_last, EventLog(root.parent, rank=0), 0, 1, **kw)


def _digest(state) -> str:
    return state_digest(state.model, state.optimizer)


def _train_and_save(mgr: CheckpointManager, state, steps: list[int]) -> dict[int, str]:
    digests = {}
    for step in steps:
        while state.step < step:
            tiny_train_step(state)
        mgr.save(step, state)
        digests[step] = _digest(state)
    mgr.wait()
    return digests


def _one_committed(root: Path, step: int) -> Path:
    """A sync manager commits one checkpoint of the tiny state at ``step``; returns its directory."""
    mgr = _manager(root)
    _train_and_save(mgr, tiny_app_state(0), [step])
    mgr.close()
    return root / step_dir_name(step)


def _events(root: Path, name: str) -> list[dict]:
    return [e for e in read_events(root.parent) if e["event"] == name]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_commit_and_restore_round_trip(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root, mode)
    state = tiny_app_state(0)
    digests = _train_and_save(mgr, state, [2, 4])
    mgr.close()
    assert [s for s, _ in list_committed(root)] == [2, 4]
    marker = read_marker(root / step_dir_name(4))
    assert marker is not None and ".metadata" in marker["files"] and "__0_0.distcp" in marker["files"]
    assert verify_checkpoint(root / step_dir_name(4)) is None
    assert {e["step"] for e in _events(root, "ckpt_committed")} == {2, 4}

    fresh = tiny_app_state(0)
    loader = _manager(root, mode)
    assert loader.load_latest(fresh) == 4
    assert _digest(fresh) == digests[4] and fresh.step == 4
    assert _events(root, "restore")[-1]["from_step"] == 4
    loader.close()


def test_a_sync_save_stalls_the_loop_until_its_commit_is_done(tmp_path: Path) -> None:
    """The stall a synchronous save reports covers the commit too (the loop waits for it)."""
    root = tmp_path / "ckpt"
    mgr = _manager(root, "sync")
    _train_and_save(mgr, tiny_app_state(0), [1, 2])
    mgr.close()
    order = [(e["event"], e["step"]) for e in read_events(tmp_path) if e["event"].startswith("ckpt_")]
    assert order == [(name, step) for step in (1, 2) for name in ("ckpt_begin", "ckpt_committed", "ckpt_staged")]
    staged, committed = _events(root, "ckpt_staged"), _events(root, "ckpt_committed")
    assert all(s["stall_s"] >= c["write_s"] for s, c in zip(staged, committed, strict=True))


def _one_slow_save(root: Path) -> CheckpointManager:
    """A manager with the async save of step 1 in flight, its write held 1.5 s."""
    mgr = _manager(root, "async", write_delay_s=1.5)
    state = tiny_app_state(0)
    tiny_train_step(state)
    mgr.save(1, state)
    return mgr


def test_a_drain_keeps_the_rank_alive_until_the_write_commits(tmp_path: Path) -> None:
    """The wait on a write in flight calls the keepalive between its polls, and returns once the write committed."""
    mgr = _one_slow_save(tmp_path / "ckpt")
    beats: list[int] = []
    mgr.drain(lambda: beats.append(1), timeout_s=60, poll_s=0.05)
    assert mgr.in_flight is None and [s for s, _ in list_committed(tmp_path / "ckpt")] == [1]
    assert beats  # at least one poll found the 1.5 s write still running
    mgr.close()


def test_a_drain_past_its_timeout_is_a_checkpoint_write_error(tmp_path: Path) -> None:
    """It ends the checkpoint section as it propagates (``ends_section``), exits 21 (``checkpoint_write``: its name
    must not read as a lost peer's timeout), and the error path's wait with the keepalive still commits the write."""
    mgr = _one_slow_save(tmp_path / "ckpt")
    mgr.keepalive = (lambda: None, 30.0)
    with pytest.raises(CheckpointWriteError, match=r"the save of step 1 did not finish within 0\.1 s") as err:
        mgr.drain(lambda: None, timeout_s=0.1, poll_s=0.05)
    assert err.value.ends_section and classify(err.value) == "checkpoint_write"
    mgr.close(collective=False)  # the error path: this rank's own write still commits (nothing lost)
    assert [s for s, _ in list_committed(tmp_path / "ckpt")] == [1]


def test_async_save_snapshots_the_state_at_save_time(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root, "async", write_delay_s=0.2)
    state = tiny_app_state(0)
    tiny_train_step(state)
    want = _digest(state)
    mgr.save(1, state)
    assert mgr.in_flight == 1
    for _ in range(2):  # training continues while the write is in flight
        tiny_train_step(state)
    mgr.close()
    fresh = tiny_app_state(0)
    assert _manager(root).load_latest(fresh) == 1
    assert _digest(fresh) == want


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "missing", "marker"])
def test_damaged_checkpoint_is_quarantined_and_previous_used(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root)
    digests = _train_and_save(mgr, tiny_app_state(0), [1, 2])
    mgr.close()
    bad = root / step_dir_name(2)
    shard = bad / "__0_0.distcp"
    if damage == "truncate":
        os.truncate(shard, shard.stat().st_size // 2)
    elif damage == "bitflip":
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0x01
        shard.write_bytes(bytes(data))
    elif damage == "missing":
        shard.unlink()
    else:
        (bad / COMMIT_MARKER).write_text("{not json")
    fresh = tiny_app_state(0)
    assert _manager(root).load_latest(fresh) == 1
    quarantined = list((root / QUARANTINE_DIR).iterdir())  # kept for inspection, never deleted
    assert [p.name.split("-")[0] for p in quarantined] == [step_dir_name(2)]
    (event,) = _events(root, "ckpt_quarantined")
    assert event["step"] == 2 and event["reason"]
    if damage == "marker":
        assert event["reason"].startswith("commit marker is not a marker")
    assert _digest(fresh) == digests[1]


def test_an_unreadable_marker_stops_the_restore_and_keeps_the_checkpoint(tmp_path: Path) -> None:
    """An I/O error reading the newest marker must not make the restore fall back to an older checkpoint (or to
    step 0 when it is the only one), nor delete or quarantine it."""
    root = tmp_path / "ckpt"
    mgr = _manager(root)
    digests = _train_and_save(mgr, tiny_app_state(0), [1, 2])
    mgr.close()
    newest = root / step_dir_name(2)
    data = make_marker_unreadable(newest)
    files = sorted(p.name for p in newest.iterdir())
    with pytest.raises(CheckpointReadError) as info:
        _manager(root).load_latest(tiny_app_state(0))
    assert f"cannot read the commit marker {newest / COMMIT_MARKER}: EISDIR" in str(info.value)
    assert sorted(p.name for p in newest.iterdir()) == files
    assert not (root / QUARANTINE_DIR).exists()
    (failed,) = _events(root, "ckpt_failed")
    assert (failed["step"], failed["op"]) == (2, "restore") and "EISDIR" in failed["error"]
    assert not [e for e in _events(root, "restore")]  # neither step 1 nor a fresh start
    restore_marker(newest, data)  # the storage recovers: the same checkpoint loads
    fresh = tiny_app_state(0)
    assert _manager(root).load_latest(fresh) == 2
    assert _digest(fresh) == digests[2]


def test_a_storage_error_in_dcp_load_is_a_checkpoint_read_error_not_dcps_base_exception(tmp_path: Path) -> None:
    """A read that fails inside ``dcp.load`` comes out of DCP as CheckpointException, a BaseException that no restart
    layer or failure ledger sees: it must come out as CheckpointReadError naming the cause, with ckpt_failed."""
    from torch.distributed.checkpoint.api import CheckpointException

    assert not issubclass(CheckpointException, Exception)
    root = tmp_path / "ckpt"
    ckpt = _one_committed(root, 2)
    shard = ckpt / "__0_0.distcp"

    def unreadable(step: int) -> None:  # verified, then the storage fails before the load reads the shard
        shard.rename(ckpt / "saved.distcp")
        shard.mkdir()

    with pytest.raises(CheckpointReadError) as info:
        _manager(root).load_latest(tiny_app_state(0), before_load=unreadable)
    assert str(info.value).startswith(f"restore of step 2 failed: {ckpt}: EISDIR: Is a directory")
    assert isinstance(info.value.__cause__, CheckpointException)
    (failed,) = _events(root, "ckpt_failed")
    assert (failed["step"], failed["op"]) == (2, "restore") and "EISDIR" in failed["error"]
    assert (ckpt / "saved.distcp").is_file() and not (root / QUARANTINE_DIR).exists()


def test_retention_never_deletes_a_checkpoint_whose_marker_cannot_be_read(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root, keep_last=1)
    state = tiny_app_state(0)
    _train_and_save(mgr, state, [1])
    older = root / step_dir_name(1)
    make_marker_unreadable(older)
    _train_and_save(mgr, state, [2])  # retention after this commit would keep only step 2
    mgr.close()
    assert older.is_dir() and (older / "__0_0.distcp").is_file()
    assert [s for s, _ in list_step_dirs(root)] == [1, 2]


def _shift_one_item(ckpt: Path) -> None:
    """Rewrite ``.metadata`` so that one item points one byte off, and re-checksum the marker: a commit of
    metadata that describes other bytes (what NVRx produced from a stale write result)."""
    with (ckpt / ".metadata").open("rb") as fh:
        md = pickle.load(fh)
    index, info = max(md.storage_data.items(), key=lambda kv: kv[1].offset)
    md.storage_data[index] = dataclasses.replace(info, offset=info.offset + 1)
    with (ckpt / ".metadata").open("wb") as fh:
        pickle.dump(md, fh)
    marker = json.loads((ckpt / COMMIT_MARKER).read_text())
    marker["files"] = file_checksums(ckpt)
    (ckpt / COMMIT_MARKER).write_text(json.dumps(marker))


def test_metadata_that_does_not_describe_the_files_is_quarantined(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root)
    digests = _train_and_save(mgr, tiny_app_state(0), [1, 2])
    mgr.close()
    good, bad = root / step_dir_name(1), root / step_dir_name(2)
    assert storage_layout_error(good) is None
    _shift_one_item(bad)
    reason = verify_checkpoint(bad)
    assert reason is not None and ".metadata does not match __0_0.distcp" in reason
    fresh = tiny_app_state(0)
    assert _manager(root).load_latest(fresh) == 1
    assert _digest(fresh) == digests[1]
    (event,) = _events(root, "ckpt_quarantined")
    assert event["step"] == 2 and ".metadata does not match" in event["reason"]


def test_layout_check_names_unlisted_and_unreadable_files(tmp_path: Path) -> None:
    ckpt = _one_committed(tmp_path / "ckpt", 1)
    (ckpt / "__9_0.distcp").write_bytes(b"stray")
    assert "__9_0.distcp" in (storage_layout_error(ckpt) or "")
    (ckpt / ".metadata").write_bytes(b"\x00" * 8)
    assert (storage_layout_error(ckpt) or "").startswith("unreadable .metadata")


def test_no_usable_checkpoint_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root)
    _train_and_save(mgr, tiny_app_state(0), [1])
    mgr.close()
    (root / step_dir_name(1) / ".metadata").unlink()
    with pytest.raises(NoUsableCheckpointError, match="quarantined"):
        _manager(root).load_latest(tiny_app_state(0))
    # Later attempts keep refusing (the quarantine remembers), unless a fresh start is explicitly allowed.
    with pytest.raises(NoUsableCheckpointError):
        _manager(root).load_latest(tiny_app_state(0))
    assert _manager(root).load_latest(tiny_app_state(0), allow_fresh_start=True) is None


def test_an_abandoned_save_is_never_committed(tmp_path: Path) -> None:
    """A save given up on the error path must not commit when its write completes later."""
    root = tmp_path / "ckpt"
    mgr = _manager(root, "async", write_delay_s=0.3)
    state = tiny_app_state(0)
    tiny_train_step(state)
    mgr.save(1, state)
    mgr.saves._inflight.abandoned = True  # what close(collective=False) marks for a save it gives up on
    with pytest.raises(CheckpointWriteError, match="abandoned"):
        mgr.wait()
    mgr.close()
    assert list_committed(root) == []


def test_abandon_async_saves_with_nothing_open() -> None:
    from training.checkpoint.manager import abandon_async_saves

    assert abandon_async_saves() == 0


@pytest.mark.parametrize("gone", ["root", "contents"])
def test_a_run_that_committed_never_starts_from_step_0_when_its_checkpoints_are_gone(tmp_path: Path, gone: str) -> None:
    """The event log of this run records commits, the root is missing (an unmounted volume) or empty: an error that
    says what to check, not a fresh start; --fresh (allow_fresh_start) still may start over."""
    root = tmp_path / "ckpt"
    ckpt = _one_committed(root, 3)
    shutil.rmtree(root if gone == "root" else ckpt)
    with pytest.raises(CheckpointRootMissingError) as info:
        _manager(root).load_latest(tiny_app_state(0))
    message = str(info.value)
    state = "does not exist" if gone == "root" else "holds no checkpoint"
    assert message.startswith(f"the checkpoint root {root} {state}, but this run's event log")
    assert f"the newest of step 3 at {ckpt}" in message and "PersistentVolumeClaim" in message
    assert not issubclass(CheckpointRootMissingError, Exception)  # no restart layer retries it
    assert not [e for e in _events(root, "restore")]
    assert _manager(root).load_latest(tiny_app_state(0), allow_fresh_start=True) is None


def test_first_run_and_partial_only_start_fresh(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    assert _manager(root).load_latest(tiny_app_state(0)) is None  # no directory at all
    (root / (step_dir_name(3) + ".tmp")).mkdir(parents=True)
    (root / (step_dir_name(3) + ".tmp") / "__0_0.distcp").write_bytes(b"partial")
    assert _manager(root).load_latest(tiny_app_state(0)) is None
    assert not list(root.iterdir())  # the partial one was cleaned up
    assert _events(root, "restore")[-1]["tier"] == "none"


def test_partial_newer_than_committed_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root)
    _train_and_save(mgr, tiny_app_state(0), [1])
    mgr.close()
    (root / (step_dir_name(5) + ".tmp")).mkdir()
    (root / step_dir_name(6)).mkdir()  # renamed by hand, never committed
    assert _manager(root).latest_committed() == 1
    assert _manager(root).load_latest(tiny_app_state(0)) == 1


def test_retention_keeps_last_k_and_removes_stale_partials(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    (root / (step_dir_name(1) + ".tmp")).mkdir(parents=True)  # leftover of a crashed save
    mgr = _manager(root, keep_last=2)
    _train_and_save(mgr, tiny_app_state(0), [2, 3, 4, 5])
    mgr.close()
    assert sorted(p.name for p in root.iterdir()) == [step_dir_name(4), step_dir_name(5)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_disk_full_raises_checkpoint_write_error(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "ckpt"
    tmp = root / (step_dir_name(1) + ".tmp")
    tmp.mkdir(parents=True)
    for name in ("__0_0.distcp", ".metadata"):  # every write into these hits a real ENOSPC
        (tmp / name).symlink_to("/dev/full")
    mgr = _manager(root, mode)
    state = tiny_app_state(0)
    with pytest.raises(CheckpointWriteError, match="ENOSPC"):
        mgr.save(1, state)
        mgr.wait()
    assert list_committed(root) == []
    assert "ENOSPC" in _events(root, "ckpt_failed")[0]["error"]
    mgr.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_full_disk_names_its_cause_from_the_file_system(tmp_path: Path, mode: str) -> None:
    """torch's writers (dcp.save and dcp.async_save) fail on a full disk without an errno ("unexpected pos ..."):
    the error must still say the file system is full, with its state."""
    with small_tmpfs(tmp_path / "mnt", "512k") as mnt:
        mgr = _manager(mnt / "ckpt", mode)
        with pytest.raises(CheckpointWriteError) as info:
            mgr.save(1, tiny_app_state(0))
            mgr.wait()
        mgr.close(collective=False)
        (failed,) = _events(mnt / "ckpt", "ckpt_failed")  # the event log is on the full file system too
    message = str(info.value)
    assert "likely cause: the file system is full (this rank's save needed 1.5 MiB)" in message
    assert f"file system: 0 B free of 512 KiB at {mnt}" in message
    assert "likely cause: the file system is full" in failed["error"]


def test_unwritable_directory_raises_checkpoint_write_error(tmp_path: Path) -> None:
    root = Path("/sys/fs/ckpt-unwritable-test") if os.geteuid() == 0 else Path("/proc/ckpt-unwritable-test")
    try:
        root.mkdir()
        root.rmdir()
        pytest.skip(f"{root.parent} is writable here")
    except OSError:
        pass
    mgr = CheckpointManager(root, "sync", 2, EventLog(tmp_path, rank=0), 0, 1, collective_timeout_s=TIMEOUT_S)
    with pytest.raises(CheckpointWriteError) as info:
        mgr.save(1, tiny_app_state(0))
    assert any(code in str(info.value) for code in ("EPERM", "EACCES", "EROFS", "ENOENT"))
    assert [e["event"] for e in read_events(tmp_path)] == ["ckpt_begin", "ckpt_failed"]
    mgr.close()


def test_slow_storage_back_pressure_one_save_in_flight(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root, "async", write_delay_s=0.3)
    state = tiny_app_state(0)
    seen_in_flight = []
    mgr.save(1, state, during_write=lambda s: seen_in_flight.append((s, mgr.in_flight, list_committed(root))))
    assert seen_in_flight == [(1, 1, [])]  # the write is still in flight during the checkpoint fault point
    tiny_train_step(state)
    mgr.save(2, state)  # blocks until step 1 is committed: never two staged copies
    order = [(e["event"], e["step"]) for e in read_events(tmp_path) if e["event"].startswith("ckpt_")]
    assert order.index(("ckpt_committed", 1)) < order.index(("ckpt_begin", 2))
    mgr.close()
    assert [s for s, _ in list_committed(root)] == [1, 2]


def test_fault_during_sync_write_leaves_no_commit(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    mgr = _manager(root)
    state = tiny_app_state(0)
    _train_and_save(mgr, state, [1])

    def crash(step: int) -> None:
        raise RuntimeError(f"injected fault at checkpoint {step}")

    tiny_train_step(state)
    with pytest.raises(RuntimeError, match="injected"):
        mgr.save(2, state, during_write=crash)
    assert [s for s, _ in list_committed(root)] == [1]
    assert (root / (step_dir_name(2) + ".tmp")).is_dir()
    # The write had finished on every rank (its .metadata is there): the restore commits it instead of deleting it.
    fresh = tiny_app_state(0)
    assert _manager(root).load_latest(fresh) == 2
    assert _digest(fresh) == _digest(state) and [s for s, _ in list_committed(root)] == [1, 2]


def _gate_commits(mgr: CheckpointManager, gate: threading.Event) -> None:
    """Rank 0's commit waits for ``gate``: a commit that takes long (hashing a large checkpoint)."""
    commit = mgr.saves._commit_then_done

    def gated(flight: InFlight) -> None:
        assert gate.wait(30)
        commit(flight)

    mgr.saves._commit_then_done = gated  # type: ignore[method-assign]


def test_the_commit_does_not_block_the_thread_that_finalizes_the_write(tmp_path: Path) -> None:
    """NVRx finalizes a finished write on the training thread: rank 0's commit must run elsewhere."""
    root = tmp_path / "ckpt"
    mgr = _manager(root, "async")
    gate = threading.Event()
    _gate_commits(mgr, gate)
    flight = finished_write(root, 3)
    mgr.saves._write_done(flight)  # returns while the commit waits
    assert not flight.done.is_set() and list_committed(root) == []
    gate.set()
    assert flight.done.wait(30) and flight.error is None
    assert [s for s, _ in list_committed(root)] == [3]
    mgr.close()


def test_a_restore_waits_for_a_commit_still_running(tmp_path: Path) -> None:
    """After an in-process restart the commit of a finished write may still run: restore must count it, and
    must not remove its directory as a partial one."""
    root = tmp_path / "ckpt"
    mgr = _manager(root, "async")
    gate = threading.Event()
    _gate_commits(mgr, gate)
    flight = finished_write(root, 4)
    mgr.saves._write_done(flight)
    threading.Timer(0.5, gate.set).start()
    fresh = tiny_app_state(0)
    assert _manager(root).load_latest(fresh) == 4
    assert flight.error is None and fresh.step == 4
    mgr.close()


def test_each_rank_hashes_only_its_share_and_together_they_find_a_bit_flip(tmp_path: Path) -> None:
    path = _one_committed(tmp_path / "ckpt", 2)
    shares = hash_shares(read_marker(path)["files"], 2)
    victim = shares[1][0]
    data = bytearray((path / victim).read_bytes())
    data[len(data) // 2] ^= 0x01
    (path / victim).write_bytes(bytes(data))
    assert verify_checkpoint(path, share=(0, 2), check_layout=False) is None  # not rank 0's file
    assert victim in verify_checkpoint(path, share=(1, 2), check_layout=False)
    assert victim in verify_checkpoint(path)


def _rank0_of_two(tmp_path: Path) -> CheckpointManager:
    """Rank 0 of a two-rank job (only its commit is driven here; rank 1 is played by the test)."""
    return CheckpointManager(
        tmp_path / "ckpt", "async", 5, EventLog(tmp_path, rank=0), 0, 2, collective_timeout_s=TIMEOUT_S
    )


def test_an_in_process_restart_stops_a_commit_waiting_for_a_lost_rank(tmp_path: Path) -> None:
    """Rank 1 died before publishing: the restart's abandon must end rank 0's wait (not the 600 s timeout)."""
    from training.checkpoint.manager import abandon_async_saves

    mgr = _rank0_of_two(tmp_path)
    flight = finished_write(mgr.root, 1)
    mgr.saves._write_done(flight)  # rank 0's commit thread now waits for rank 1's checksums
    assert not flight.done.wait(0.5)
    abandon_async_saves()
    assert flight.done.wait(10)
    assert "abandoned" in str(flight.error)
    assert list_committed(mgr.root) == []
    mgr.close()


def test_a_transient_read_error_while_verifying_never_costs_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, item 5: one EIO while verifying the only checkpoint quarantined it, and the run ended with exit 20.
    The read is retried; only a digest mismatch is damage."""
    root = tmp_path / "ckpt"
    _one_committed(root, 2)
    failed = failing_hashes(monkeypatch, 1)
    fresh = tiny_app_state(0)
    assert _manager(root).load_latest(fresh) == 2
    assert len(failed) == 1 and not (root / QUARANTINE_DIR).exists()


def test_a_read_error_that_persists_while_verifying_is_a_storage_error_and_keeps_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ckpt"
    ckpt = _one_committed(root, 2)
    files = sorted(p.name for p in ckpt.iterdir())
    failing_hashes(monkeypatch, 100)
    with pytest.raises(CheckpointReadError, match="EIO: Input/output error"):
        _manager(root).load_latest(tiny_app_state(0))
    assert sorted(p.name for p in ckpt.iterdir()) == files and not (root / QUARANTINE_DIR).exists()
    assert classify(CheckpointReadError("x")) == "checkpoint_write"  # exit 21 once retried, never 20
