"""The save backends' own parts: torch's async path stages into one kept CPU copy."""

from __future__ import annotations

from pathlib import Path

import torch

from training.checkpoint.backends import StagingCopy, TorchAsync


def _state(step: int, weight: float) -> dict:
    return {"app": {"step": step, "w": torch.full((2, 3), weight), "rng": [torch.tensor([step]), "name"]}}


def test_a_second_save_is_staged_into_the_first_save_s_copy_with_its_own_values() -> None:
    staging = StagingCopy()
    first = staging.stage(_state(5, 1.0))
    kept = first["app"]["w"]
    second = staging.stage(_state(10, 2.0))
    assert second["app"]["w"] is kept  # no new buffers
    assert second["app"]["step"] == 10 and second["app"]["rng"][0].item() == 10 and second["app"]["rng"][1] == "name"
    assert torch.equal(kept, torch.full((2, 3), 2.0))


def test_the_staged_copy_is_not_the_training_state() -> None:
    state = _state(5, 1.0)
    staged = StagingCopy().stage(state)
    state["app"]["w"].add_(1.0)  # training goes on while the write runs
    assert torch.equal(staged["app"]["w"], torch.full((2, 3), 1.0))


def test_a_state_of_another_layout_gets_a_new_copy() -> None:
    staging = StagingCopy()
    kept = staging.stage(_state(5, 1.0))["app"]["w"]
    wider = {"app": {"step": 6, "w": torch.full((2, 4), 3.0), "rng": [torch.tensor([6]), "name"]}}
    staged = staging.stage(wider)
    assert staged["app"]["w"] is not kept and torch.equal(staged["app"]["w"], torch.full((2, 4), 3.0))
    more = staging.stage({"app": {"step": 7, "w": torch.ones(2, 4), "rng": [torch.tensor([7])], "new": 1}})
    assert more["app"]["new"] == 1 and more["app"]["rng"][0].item() == 7


def test_a_backend_given_up_with_a_write_running_drops_its_copy() -> None:
    backend = TorchAsync(0.0)
    kept = backend.staging
    kept.stage(_state(5, 1.0))
    backend.close(collective=False, given_up=True)
    assert backend.staging is not kept and backend.staging.copy is None
    writer = backend.writer(Path("/nonexistent"))
    assert writer.stage == backend.staging.stage  # dcp.async_save stages through the writer
