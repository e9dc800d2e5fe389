"""AppState (DCP Stateful) round trips and the canonical state digest, on a real one-rank gloo group."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed.checkpoint as dcp

from tests.helpers.training_runs import single_process_group, tiny_app_state, tiny_train_step
from training.checkpoint.state import state_digest


@pytest.fixture(autouse=True)
def _group():
    with single_process_group():
        yield


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def state_dict(self) -> dict[str, Any]:
        return {"n": self.n}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.n = sd["n"]


def test_digest_is_stable_and_tracks_changes() -> None:
    a, b = tiny_app_state(1), tiny_app_state(1)
    tiny_train_step(a)
    tiny_train_step(b)
    assert state_digest(a.model, a.optimizer) == state_digest(b.model, b.optimizer)
    tiny_train_step(b)
    assert state_digest(a.model, a.optimizer) != state_digest(b.model, b.optimizer)


def test_round_trip_restores_model_optimizer_sampler_step_rng_and_extra(tmp_path: Path) -> None:
    counter = Counter()
    src = tiny_app_state(2, extra={"counter": counter})
    for _ in range(3):
        tiny_train_step(src)
    counter.n = 41
    torch.manual_seed(99)
    random.seed(5)
    np.random.seed(6)
    dcp.save({"app": src}, checkpoint_id=tmp_path)
    expected_rng = (torch.rand(3), random.random(), np.random.rand())
    want = state_digest(src.model, src.optimizer)

    other = Counter()
    dst = tiny_app_state(2, extra={"counter": other})  # same data seed, initial weights
    assert state_digest(dst.model, dst.optimizer) != want
    dcp.load({"app": dst}, checkpoint_id=tmp_path)
    assert state_digest(dst.model, dst.optimizer) == want
    assert dst.step == 3 and dst.sampler.position == src.sampler.position and other.n == 41
    got = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(got[0], expected_rng[0]), (got[0], expected_rng[0])  # torch's generator, restored
    assert got[1:] == expected_rng[1:]  # Python's and numpy's
    # The loaded state continues exactly like the original.
    assert tiny_train_step(dst) == tiny_train_step(src)


def test_prepare_load_falls_back_to_rank_0_entry() -> None:
    s = tiny_app_state(0)
    assert s.prepare_load(["app.rank_0.rng.torch", "app.step"]) == 0
    s.rank = 1
    assert s.prepare_load(["app.rank_0.rng.torch"]) == 0
    assert s.prepare_load(["app.rank_1.rng.torch"]) == 1


def test_the_digest_combines_per_row_digests_so_the_sharding_does_not_matter() -> None:
    """Rank 0 combines what each rank hashed of its own shard: two ranks with one row each give what one rank with
    both rows gives (value recorded once from combine_digests)."""
    from training.checkpoint.state import combine_digests

    lr = ("whole", b"\x02" * 32)
    two = [
        {"model.w": ("rows", b"torch.float32(2, 2)\0" + b"\x01" * 32), "optim.lr": lr},
        {"model.w": ("rows", b"torch.float32(2, 2)\0" + b"\x03" * 32), "optim.lr": lr},
    ]
    one = [{"model.w": ("rows", b"torch.float32(2, 2)\0" + b"\x01" * 32 + b"\x03" * 32), "optim.lr": lr}]
    want = "1b031e8e2710e85e81b6fb41455aaf566a0cabdf3c51457fc2b52deef77e514d"
    assert combine_digests(two) == combine_digests(one) == want
