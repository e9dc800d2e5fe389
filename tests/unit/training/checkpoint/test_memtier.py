"""The memory tier (``training.checkpoint.memtier``): own memory on a real one-rank gloo group, and a peer's copy
across two real processes over gloo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.training_runs import REPO_ROOT, single_process_group, tiny_app_state, tiny_train_step, torchrun
from training.checkpoint import shm_scope
from training.checkpoint.hostbuf import Slot
from training.checkpoint.memtier import MemoryTier, holds_snapshot
from training.checkpoint.state import state_digest
from training.telemetry.events import EventLog, read_events


@pytest.fixture
def tier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(shm_scope.SHM_BASE_ENV, str(tmp_path / "shm"))
    (tmp_path / "shm").mkdir()
    with single_process_group():
        t = MemoryTier(tmp_path / "ckpt", 5, 0, 1, 1, EventLog(tmp_path, rank=0), collective_timeout_s=10)
        yield t
        t.close(collective=True)


def _state_tensors(state) -> list:
    """The model's and optimizer's local tensors (what a snapshot holds, each padded to 64 bytes)."""
    from torch.distributed.tensor import DTensor

    tensors = [p.to_local() if isinstance(p, DTensor) else p for p in state.model.parameters()]
    for per_param in state.optimizer.state.values():
        tensors += [v.to_local() if isinstance(v, DTensor) else v for v in per_param.values() if hasattr(v, "numel")]
    return tensors


def _train_and_snapshot(tier: MemoryTier, state, steps: list[int]) -> dict[int, str]:
    digests = {}
    for step in steps:
        while state.step < step:
            tiny_train_step(state)
        tier.snapshot(step, state)
        digests[step] = state_digest(state.model, state.optimizer)
    tier.wait()
    return digests


def test_two_slots_alternate_and_the_newest_snapshot_is_restored_from_own_memory(tier, tmp_path: Path) -> None:
    state = tiny_app_state(0)
    digests = _train_and_snapshot(tier, state, [5, 10, 15])
    metas = sorted((s.read_meta()["step"], s.index) for s in (Slot(tier.dir, 0, 0), Slot(tier.dir, 0, 1)))
    assert metas == [(10, 1), (15, 0)]  # 5 went to slot 0, 10 to slot 1, 15 replaced 5
    fresh = tiny_app_state(0)
    got = tier.restore(fresh, at_least=-1)
    assert got is not None and got.pop("load_s") > 0
    nbytes = sum(-(-t.numel() * t.element_size() // 64) * 64 for t in _state_tensors(state))
    assert got == {"from_step": 15, "tier": "memory", "per_rank_tier": ["memory"], "nbytes": nbytes}
    assert state_digest(fresh.model, fresh.optimizer) == digests[15] and fresh.step == 15
    assert fresh.sampler.position == state.sampler.position
    assert tiny_train_step(fresh) == tiny_train_step(state)  # and it continues exactly like the original
    snaps = [e["step"] for e in read_events(tmp_path) if e["event"] == "mem_snapshot"]
    assert snaps == [5, 10, 15]


def test_a_restart_knows_before_building_its_model_whether_memory_holds_a_snapshot(tier, tmp_path: Path) -> None:
    """The trainer builds its model on the meta device when a snapshot will fill it: none before the first snapshot,
    one after it, none for another checkpoint root, and none once a slot's meta no longer verifies."""
    root = tmp_path / "ckpt"
    assert holds_snapshot(root) is False
    _train_and_snapshot(tier, tiny_app_state(0), [5])
    assert holds_snapshot(root) is True
    assert holds_snapshot(tmp_path / "other-run") is False
    meta = Slot(tier.dir, 0, 0).meta_path
    meta.write_bytes(meta.read_bytes()[:-1] + b"?")
    assert holds_snapshot(root) is False


def test_a_snapshot_that_fails_its_checksum_is_never_loaded(tier) -> None:
    _train_and_snapshot(tier, tiny_app_state(0), [5])
    data = Slot(tier.dir, 0, 0).data_path
    raw = bytearray(data.read_bytes())
    raw[100] ^= 0x01
    data.write_bytes(bytes(raw))
    fresh = tiny_app_state(0)
    assert tier.restore(fresh, at_least=-1) is None  # storage next
    # and the fresh optimizer is as it was: a state dict initialises its state, which a fresh start must not see
    assert not fresh.optimizer.state


def test_storage_newer_than_every_snapshot_wins(tier) -> None:
    _train_and_snapshot(tier, tiny_app_state(0), [5])
    fresh = tiny_app_state(0)
    assert tier.restore(fresh, at_least=6) is None and not fresh.optimizer.state


def test_release_removes_the_slots(tier) -> None:
    _train_and_snapshot(tier, tiny_app_state(0), [5, 10])
    tier.release()
    assert not tier.dir.exists()


@pytest.mark.integration
def test_a_replaced_node_restores_from_its_peer_s_copy_over_gloo(tmp_path: Path) -> None:
    proc = torchrun([REPO_ROOT / "tests" / "helpers" / "memtier_ranks.py", tmp_path], nproc=2, timeout_s=120)
    assert "cold start" not in proc.stderr  # torchrun and both ranks forked from the suite's template
    result = json.loads((tmp_path / "result.json").read_text())
    # rank 0 kept its process (own memory); rank 1, a new node, got its snapshot from rank 0
    restored = {k: v for k, v in result["restored"].items() if k not in ("load_s", "nbytes")}
    assert restored == {"from_step": 10, "tier": "peer", "per_rank_tier": ["memory", "peer"]}
    assert result["got"] == result["want"] and result["step"] == 10
