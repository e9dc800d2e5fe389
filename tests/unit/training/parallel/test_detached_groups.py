"""A failed iteration's groups taken out of torch's registry and aborted afterwards
(``training.parallel.detached_groups``): real gloo groups, real threads."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from training.parallel import background_abort, detached_groups


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _world_of_one(prefix: str, store: dist.TCPStore) -> None:
    dist.init_process_group("gloo", store=dist.PrefixStore(prefix, store), rank=0, world_size=1)


@pytest.fixture
def store() -> Iterator[dist.TCPStore]:
    store = dist.TCPStore("127.0.0.1", _free_port(), 1, is_master=True, wait_for_workers=False)
    yield store
    if dist.is_initialized():
        dist.destroy_process_group()
    background_abort.await_abort(5.0)


def test_this_torch_has_everything_the_detach_needs() -> None:
    assert detached_groups.missing() == []


def test_a_detached_world_is_gone_from_torch_and_a_new_one_is_made_beside_it(store: dist.TCPStore) -> None:
    _world_of_one("iter0", store)
    side = dist.new_group([0], backend="gloo")
    detached = detached_groups.detach()
    assert not dist.is_initialized()
    assert len(detached.groups) == 2 and side in detached.groups
    assert dist.distributed_c10d._world.pg_map == {} and dist.distributed_c10d._world.group_count == 0

    _world_of_one("iter1", store)  # the next iteration's group, while the old ones are still alive
    t = torch.ones(3)
    dist.all_reduce(t)
    assert t.tolist() == [1.0, 1.0, 1.0]
    assert dist.new_group([0], backend="gloo").group_name == "1"  # names count from 0 again, as after a destroy

    detached_groups.abort(detached)
    assert detached.groups == []
    dist.all_reduce(t)  # the new world is untouched by the old one's shutdown
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_every_group_is_shut_down_and_the_first_error_raised() -> None:
    shut: list[str] = []

    class Group:
        def __init__(self, name: str, fails: bool) -> None:
            self.name, self.fails = name, fails

        def _get_backend(self, device: torch.device) -> object:
            raise RuntimeError("No backend type associated with device type cuda")

        def shutdown(self) -> None:
            shut.append(self.name)
            if self.fails:
                raise RuntimeError(f"{self.name}: connection reset")

    detached = detached_groups.Detached(groups=[Group("1", True), Group("0", True)])
    with pytest.raises(RuntimeError, match="1: connection reset"):
        detached_groups.abort(detached)
    assert shut == ["1", "0"]


def test_the_next_group_does_not_wait_for_a_detached_abort_but_waits_for_one_in_place(
    store: dist.TCPStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from platform_config import config_from_dict
    from training.parallel.iteration_group import IterationGroups

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    groups = IterationGroups(config_from_dict({}).local.inprocess)
    assert groups.init(0, 0, 1) == {"abort_wait_s": 0.0, "abort_running": False}

    release = threading.Event()
    detached = detached_groups.detach()
    background_abort.abort_in_background(
        lambda: (release.wait(5.0), detached_groups.abort(detached)), blocks_next_group=False
    )
    t0 = time.monotonic()
    event = groups.init(1, 0, 1)
    assert time.monotonic() - t0 < 1.0 and event == {"abort_wait_s": 0.0, "abort_running": True}
    release.set()

    dist.destroy_process_group()
    background_abort.abort_in_background(lambda: time.sleep(0.3))  # NVRx's own abort: the group waits for it
    event = groups.init(2, 0, 1)
    assert 0.2 < event["abort_wait_s"] < 2.0 and event["abort_running"] is False
