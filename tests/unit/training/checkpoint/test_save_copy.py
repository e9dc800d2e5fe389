"""The copy a save is handed from (``training.checkpoint.save_copy``), on a real one-rank gloo group and a real FSDP2
model. Without CUDA nothing is on a device, so the tests copy every tensor (``copied``) and give the room."""

from __future__ import annotations

import functools
import pickle

import pytest
import torch
from torch.distributed.tensor import DTensor

from tests.helpers.training_runs import single_process_group, tiny_app_state, tiny_train_step
from training.checkpoint.save_copy import PreloadThenWrite, SaveCopy, kept_save_copy
from training.checkpoint.snapshot import split
from training.checkpoint.storage import human_bytes


def every_tensor(_: torch.Tensor) -> bool:
    return True


@pytest.fixture
def state():
    with single_process_group():
        s = tiny_app_state(0)
        tiny_train_step(s)
        yield s


def test_a_save_is_handed_copies_that_keep_the_values_and_the_sharding_and_later_saves_reuse_the_buffer(
    state, capsys
) -> None:
    copy = SaveCopy(room=lambda n: n, copied=every_tensor)
    live = split({"app": state.state_dict()})
    first = split(copy.stage({"app": state.state_dict()}))
    assert len(first.objects) == len(live.objects) == 85
    for held, original in zip(first.objects, live.objects, strict=True):
        assert held is not original and type(held) is type(original) and held.shape == original.shape
        assert torch.equal(held, original)
        if isinstance(original, DTensor):
            assert held.placements == original.placements and held.device_mesh is original.device_mesh
            assert held.to_local().untyped_storage().data_ptr() == copy.buffer.untyped_storage().data_ptr()
    assert first.keys == live.keys
    buffer, before = copy.buffer, [t.clone() for t in first.local]

    tiny_train_step(state)  # the live state moves on; the copy holds the save's values until the next save
    assert all(torch.equal(a, b) for a, b in zip(first.local, before, strict=True))
    second = split(copy.stage({"app": state.state_dict()}))
    assert copy.buffer is buffer
    assert all(a is b for a, b in zip(second.objects, first.objects, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(second.local, split({"app": state.state_dict()}).local, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(second.local, before, strict=True))
    said = capsys.readouterr().out.splitlines()
    assert said == [
        f"[checkpoint] cuda-copy staging: each save is copied on the CPU first ({human_bytes(buffer.numel())}, kept "
        "for the next saves); the writer copies that to host after the hand-over"
    ]  # once: the second save reused the buffer


def test_without_room_for_the_whole_copy_nothing_is_copied_and_that_is_said_once(state, capsys) -> None:
    nbytes = []
    copy = SaveCopy(room=lambda n: nbytes.append(n) or n - 64, copied=every_tensor)
    assert copy.handed({"app": state.state_dict()}) is None
    assert copy.handed({"app": state.state_dict()}) is None
    assert copy.buffer is None
    expected = sum(-(-t.numel() * t.element_size() // 64) * 64 for t in split({"app": state.state_dict()}).local)
    assert nbytes == [expected, expected]
    said = capsys.readouterr().out
    assert said.count("rank 0: cuda-copy staging: no room on the GPU for a copy of the save") == 1
    assert "the loop waits for the writer's device-to-host copy at each save" in said


def test_by_default_cpu_tensors_are_not_copied(state) -> None:
    sd = {"app": state.state_dict()}
    assert SaveCopy(room=lambda n: n).stage(sd) is sd  # on this machine every tensor is on the CPU


def test_the_writer_function_runs_the_preload_then_writes_its_result_and_pickles() -> None:
    write = PreloadThenWrite(functools.partial(str.upper, "buckets"), _write)
    assert write(4, None, "results") == (4, "BUCKETS", "results")
    assert pickle.loads(pickle.dumps(write))(3, None, "results") == (3, "BUCKETS", "results")


def _write(rank: int, buckets: str, results: str) -> tuple[int, str, str]:
    return rank, buckets, results


def test_the_process_keeps_one_save_copy() -> None:
    assert kept_save_copy() is kept_save_copy()
