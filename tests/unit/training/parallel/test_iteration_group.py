"""The default process group of each in-process iteration (:mod:`training.parallel.iteration_group`)."""

from __future__ import annotations

import socket

import pytest
import torch.distributed as dist

from platform_config import config_from_dict
from training.parallel.iteration_group import IterationGroups, agent_store, store_prefix


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "train_iter3"),
        ({"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "2"}, "train_r2_iter3"),
        ({"TORCHELASTIC_USE_AGENT_STORE": "true", "TORCHELASTIC_RESTART_COUNT": ""}, "train_r0_iter3"),
        ({"TORCHELASTIC_USE_AGENT_STORE": "false", "TORCHELASTIC_RESTART_COUNT": "2"}, "train_iter3"),
    ],
)
def test_each_generation_and_iteration_has_a_prefix_of_its_own(env: dict[str, str], expected: str) -> None:
    assert store_prefix(3, env) == expected
    assert agent_store(env) == (expected != "train_iter3")


def test_a_later_iteration_gets_a_new_group_on_the_same_store(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    groups = IterationGroups(config_from_dict({}).local.inprocess)
    try:
        groups.init(0, 0, 1)
        store = groups._store
        assert dist.get_world_size() == 1 and store.add("train_iter0/barrier/arrived", 0) == 1
        groups.init(1, 0, 1)  # iteration 0's group is still alive (no NVRx abort here): aborted, then replaced
        assert groups._store is store and dist.is_initialized()
        assert store.add("train_iter1/barrier/arrived", 0) == 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
