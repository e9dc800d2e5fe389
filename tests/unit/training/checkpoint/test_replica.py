"""Peer placement and the search for the newest step every rank can get (``training.checkpoint.replica``)."""

from __future__ import annotations

from training.checkpoint.replica import Held, farthest, newest_common_step, peers, plan, tier_of


def test_each_rank_s_copy_lives_on_the_next_node() -> None:
    # 2 nodes x 1: the two ranks hold each other's copy
    assert [peers(r, 2, 1) for r in range(2)] == [(1, 1), (0, 0)]
    # 3 nodes x 2: rank r's copy is held by rank r - 2, and rank r holds rank r + 2's (mod 6)
    assert [peers(r, 6, 2) for r in range(6)] == [(4, 2), (5, 3), (0, 4), (1, 5), (2, 0), (3, 1)]
    # one node: no peer (the copy would share the pod's memory)
    assert peers(0, 2, 2) == (None, None) and peers(0, 1, 1) == (None, None)


def _held(holder: int, owner: int, step: int, *, live: bool = True, sig: str = "s", world: int = 2) -> Held:
    return Held(holder, owner, step, world, sig, 64, 100, 0, live)


def test_the_newest_step_every_rank_can_get_wins() -> None:
    held = [
        _held(0, 0, 10), _held(0, 0, 15), _held(0, 1, 10),  # rank 0: its own 10 and 15, rank 1's copy of 10
        _held(1, 1, 5), _held(1, 0, 5),  # rank 1 (replaced, then restarted): old snapshots only
    ]  # fmt: skip
    assert newest_common_step(held, 2, ["s", "s"], at_least=0) == 10  # 15: nobody holds rank 1's
    assert newest_common_step(held, 2, ["s", "s"], at_least=11) is None  # storage is newer
    assert newest_common_step(held, 2, ["s", "other"], at_least=0) is None  # rank 1's layout changed
    assert newest_common_step(held, 3, ["s", "s", "s"], at_least=0) is None  # another world size: storage


def test_the_plan_prefers_own_memory_then_own_shm_then_the_lowest_peer() -> None:
    held = [_held(0, 0, 10, live=False), _held(0, 1, 10), _held(1, 0, 10), _held(2, 1, 10, world=3)]
    held += [_held(1, 1, 10, live=False), _held(1, 1, 10, live=True)]
    chosen = plan(held, 10, 2, ["s", "s"])
    assert [(c.holder, c.owner, c.live) for c in chosen] == [(0, 0, False), (1, 1, True)]
    assert [tier_of(c) for c in chosen] == ["shm", "memory"]
    lost = [h for h in held if h.holder != 1]  # rank 1's node was replaced
    chosen = plan(lost, 10, 2, ["s", "s"])
    assert [(c.holder, c.owner) for c in chosen] == [(0, 0), (0, 1)]
    assert [tier_of(c) for c in chosen] == ["shm", "peer"] and farthest(["shm", "peer", "memory"]) == "peer"
