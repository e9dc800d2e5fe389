"""The Trainer in one process on a real one-rank gloo group: what it hands the checkpoint layer."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from platform_config import ProjectConfig, config_from_dict
from tests.helpers.training_runs import FAST_CONFIG, group_timeout_s, single_process_group
from training.checkpoint import shm_scope
from training.checkpoint.backends import Backend
from training.checkpoint.files import list_committed
from training.parallel import distributed
from training.resilience.exit_codes import ExitCode, UnrecoverableError, exit_code_for
from training.telemetry.events import EventLog, read_events
from training.telemetry.goodput import analyze
from training.trainer import Trainer


def test_the_checkpoint_group_keeps_its_deadline_when_the_default_group_is_nccl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CUDA the default group is NCCL with ``barrier_timeout_s`` (above the in-process hard timeout, as NVRx
    requires). The checkpoint group is gloo, which NVRx cannot abort: it must not inherit that timeout (nor
    torch's 30-minute default), so a rank blocked in a checkpoint collective leaves before the hard timeout."""
    cfg = config_from_dict(FAST_CONFIG)
    ip = cfg.inprocess
    monkeypatch.setattr(distributed, "default_backend", lambda: "nccl")  # the lookup training.train makes on CUDA
    default_s = distributed.collective_timeout_s(ip)
    assert default_s == ip.barrier_timeout_s > ip.hard_timeout_s
    with single_process_group(timeout_s=default_s):
        trainer = Trainer(cfg, tmp_path, EventLog(tmp_path, 0), checkpoint_mode="sync", target_steps=1)
        trainer.setup()
        assert trainer.ckpt is not None
        assert group_timeout_s(trainer.ckpt.pg) == ip.gloo_timeout_s == 10.0
        assert ip.gloo_timeout_s < ip.hard_timeout_s
        trainer.close()


def _train(cfg, run_dir: Path, steps: int) -> Trainer:  # type: ignore[no-untyped-def]
    trainer = Trainer(cfg, run_dir, EventLog(run_dir, 0), checkpoint_mode="sync", target_steps=steps)
    trainer.setup()
    trainer.restore()
    trainer.train()
    trainer.close()
    return trainer


def _saves(run_dir: Path) -> list[int]:
    return [e["step"] for e in read_events(run_dir) if e["event"] == "ckpt_begin"]


def test_the_target_step_is_saved_when_the_interval_does_not_land_on_it(tmp_path: Path) -> None:
    cfg = config_from_dict(FAST_CONFIG)  # a checkpoint every 5 steps
    assert cfg.checkpoint.interval_steps == 5
    with single_process_group():
        _train(cfg, tmp_path / "seven", 7)
        assert _saves(tmp_path / "seven") == [5, 7]
        assert [s for s, _ in list_committed(tmp_path / "seven" / "checkpoints")] == [5, 7]
        _train(cfg, tmp_path / "seven", 7)  # restored at the target: nothing to save again
        assert _saves(tmp_path / "seven") == [5, 7]
        _train(cfg, tmp_path / "ten", 10)  # the interval lands on the target: saved once
        assert _saves(tmp_path / "ten") == [5, 10]


def _with_memory_tier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, every: int) -> ProjectConfig:
    """The fast config with a storage save every 5 steps and a memory snapshot ``every`` steps, its shared memory
    under ``tmp_path``."""
    monkeypatch.setenv(shm_scope.SHM_BASE_ENV, str(tmp_path / "shm"))
    (tmp_path / "shm").mkdir()
    checkpoint = {"interval_steps": 5, "keep_last": 3, "memory_interval_steps": every}
    return config_from_dict({**FAST_CONFIG, "checkpoint": checkpoint})


def test_a_step_restored_from_memory_is_saved_to_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, item 1: a run killed while saving its last step restored that step from memory, counted it as
    checkpointed and ended with storage's newest step 5 of 10. Only a committed step in storage counts."""
    cfg = _with_memory_tier(tmp_path, monkeypatch, every=5)
    with single_process_group():
        first = Trainer(cfg, tmp_path, EventLog(tmp_path, 0), checkpoint_mode="sync", target_steps=10)
        first.setup()
        first.restore()
        first.train = lambda: None  # type: ignore[method-assign]
        for step in range(1, 11):  # the loop up to the fault: saved at 5, snapshot at 5 and 10
            first.step = first.state.step = step
            first.train_step(step)
            if step == 1:  # as Trainer.train: the memory tier maps its slots after the first step
                first.ckpt.warm_up(first.state)
            if first.ckpt.memory_due(step):
                first.ckpt.snapshot(step, first.state)
            if step == 5:
                first.save_checkpoint()
        first.close(failed=True)  # killed while saving step 10: the memory tier keeps it
        second = Trainer(cfg, tmp_path, EventLog(tmp_path, 0), checkpoint_mode="sync", target_steps=10)
        second.setup()
        assert second.restore() == 10
        assert [e["tier"] for e in read_events(tmp_path) if e["event"] == "restore"][-1] == "memory"
        assert second.train() == 10
        second.close()
    assert [s for s, _ in list_committed(tmp_path / "checkpoints")] == [5, 10]


def test_a_fresh_start_readies_the_memory_tier_slots_before_the_model_is_built_at_their_exact_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    cfg = _with_memory_tier(tmp_path, monkeypatch, every=2)
    with single_process_group():
        trainer = Trainer(cfg, tmp_path, EventLog(tmp_path, 0), checkpoint_mode="sync", target_steps=4)
        trainer.setup()
        assert trainer.restore() == 0 and trainer.train() == 4
        trainer.close()
    (prepared,) = [e for e in read_events(tmp_path) if e["event"] == "mem_prepare"]
    snapshots = [e for e in read_events(tmp_path) if e["event"] == "mem_snapshot"]
    assert prepared["early"] is True and [e["step"] for e in snapshots] == [2, 4]
    # the size known before the optimizer state existed is the snapshot's, exactly
    assert f"host slots mapped at start-up ({snapshots[0]['nbytes']} bytes) in " in capsys.readouterr().out


#: The fast config with storage saves only (no memory tier): a save every 5 steps.
STORAGE_ONLY = {**FAST_CONFIG, "checkpoint": {**FAST_CONFIG["checkpoint"], "memory_interval_steps": 0}}


def _full_disk_for(monkeypatch: pytest.MonkeyPatch, saves: int | None) -> list[int]:
    """The next ``saves`` synchronous writes (None: every one) fail with ENOSPC; returns the steps that failed."""
    real, failed = Backend.start, []

    def start(self, flight, state_dict, pg, write_done):  # type: ignore[no-untyped-def]
        if saves is None or len(failed) < saves:
            failed.append(flight.step)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, flight, state_dict, pg, write_done)

    monkeypatch.setattr(Backend, "start", start)
    return failed


def test_a_failed_save_is_not_a_training_fault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, item 2: a full disk failed the save of step 300 of the 1B model, and the run restarted, restored
    step 200 and retrained 100 steps, until its restarts ran out. The live state is fine: training goes on, the
    save is tried again at the next interval, and the report counts the failure."""
    cfg = config_from_dict(STORAGE_ONLY)  # a save every 5 steps
    failed = _full_disk_for(monkeypatch, 1)
    with single_process_group():
        trainer = _train(cfg, tmp_path, 12)
    assert failed == [5] and trainer.step == 12
    assert [s for s, _ in list_committed(tmp_path / "checkpoints")] == [10, 12]
    assert not list((tmp_path / "checkpoints").glob("*.tmp"))  # the failed save's directory is removed
    events = read_events(tmp_path)
    assert [e["step"] for e in events if e["event"] == "ckpt_failed"] == [5]
    assert "ENOSPC" in next(e["error"] for e in events if e["event"] == "ckpt_failed")
    assert analyze(events).checkpoint_summary()["failed"] == 1


def test_consecutive_failed_saves_stop_the_run_with_the_storage_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = config_from_dict(STORAGE_ONLY)
    assert cfg.checkpoint.max_failed_saves == 3
    failed = _full_disk_for(monkeypatch, None)
    with single_process_group():
        trainer = Trainer(cfg, tmp_path, EventLog(tmp_path, 0), checkpoint_mode="sync", target_steps=40)
        trainer.setup()
        trainer.restore()
        with pytest.raises(UnrecoverableError) as info:
            trainer.train()
        trainer.close(failed=True)
    assert failed == [5, 10, 15] and trainer.step == 15
    assert getattr(info.value, "cause", None) == "checkpoint_write"
    assert exit_code_for(info.value.cause, 42) == ExitCode.CHECKPOINT_WRITE == 21
    assert "3 consecutive saves failed (checkpoint.max_failed_saves = 3)" in info.value.reason
    assert "ENOSPC" in info.value.reason
