"""The restore's use of a failed iteration's staging buffer (``training.checkpoint.restore_copy``), with known bytes.

On this CPU machine the "GPU" staging buffer is a CPU tensor set by hand: the hand-over logic is device-independent.
"""

from __future__ import annotations

import pytest
import torch

from training.checkpoint.fingerprint import fingerprint
from training.checkpoint.restore_copy import copy_from_pageable, let_go_handed_over
from training.checkpoint.snapshot import copy_in, layout_of, split
from training.checkpoint.snapshot_copy import SnapshotCopier


def _state(w: list[float]) -> dict:
    return {"model": {"w": torch.tensor(w), "n": torch.tensor([7, 8], dtype=torch.int64)}}


@pytest.fixture
def snapshot() -> tuple:
    """The layout and bytes of w = [1, 2, 3], n = [7, 8] (128 bytes), and the fingerprint of those bytes."""
    src = split(_state([1.0, 2.0, 3.0]))
    layout = layout_of(src)
    buf = torch.zeros(layout.nbytes, dtype=torch.uint8)
    copy_in(buf, layout, src)
    yield layout, buf, fingerprint(buf)
    let_go_handed_over()


def _failed_copier(staging: torch.Tensor, holding: str | None) -> SnapshotCopier:
    """A copier whose staging buffer holds ``staging`` (as a CUDA copier's would after a whole-staged save)."""
    old = SnapshotCopier()
    old._staging = staging
    if holding is not None:  # its save finished: staged whole and fingerprinted on the "GPU"
        old.holds(holding, staged_whole=True)
    return old


def test_a_restore_reads_the_failed_iterations_staging_buffer_when_it_holds_the_snapshot(snapshot: tuple) -> None:
    layout, buf, fp = snapshot
    _failed_copier(buf.clone(), fp).hand_over()
    new = SnapshotCopier()
    empty_host = torch.zeros_like(buf)  # not read: the bytes come from the staging buffer
    assert new.verify(empty_host, layout.nbytes, fp) is True
    assert new.restored_from == "gpu"
    live = split(_state([0.0, 0.0, 0.0]))
    new.scatter(empty_host, layout, live)
    assert live.objects[0].tolist() == [1.0, 2.0, 3.0] and live.objects[1].tolist() == [7, 8]


def test_a_staging_buffer_that_changed_since_is_not_used(snapshot: tuple, capsys: pytest.CaptureFixture) -> None:
    layout, buf, fp = snapshot
    changed = buf.clone()
    changed[0] ^= 1  # one flipped bit after the save
    _failed_copier(changed, fp).hand_over()
    new = SnapshotCopier()
    assert new.verify(buf, layout.nbytes, fp) is True  # from the host buffer
    assert new.restored_from == "cpu"
    assert "GPU copy of the snapshot changed" in capsys.readouterr().out


def test_the_snapshot_in_flight_at_the_fault_claims_the_buffer_after_the_hand_over(snapshot: tuple) -> None:
    layout, buf, fp = snapshot
    old = _failed_copier(buf.clone(), None)  # the save of the newest snapshot was still draining at the fault
    old.hand_over()
    old.holds(fp, staged_whole=True)  # the tier's thread finishes it; the restore waits for that thread
    new = SnapshotCopier()
    assert new.verify(torch.zeros_like(buf), layout.nbytes, fp) is True and new.restored_from == "gpu"


def test_a_buffer_no_whole_snapshot_claimed_is_not_used(snapshot: tuple) -> None:
    layout, buf, fp = snapshot
    old = _failed_copier(buf.clone(), None)
    old.hand_over()
    old.holds(fp, staged_whole=False)  # a snapshot not staged whole leaves the buffer unclaimed
    new = SnapshotCopier()
    assert new.verify(buf, layout.nbytes, fp) is True and new.restored_from == "cpu"


def test_a_snapshot_of_another_fingerprint_is_read_from_the_host(snapshot: tuple) -> None:
    layout, buf, fp = snapshot
    _failed_copier(torch.zeros_like(buf), fingerprint(torch.zeros_like(buf))).hand_over()
    new = SnapshotCopier()
    assert new.verify(buf, layout.nbytes, fp) is True and new.restored_from == "cpu"


def test_a_handed_over_buffer_is_let_go_by_the_next_restore_or_prepare(snapshot: tuple) -> None:
    layout, buf, fp = snapshot
    _failed_copier(buf.clone(), fp).hand_over()
    let_go_handed_over()
    new = SnapshotCopier()
    assert new.verify(torch.zeros_like(buf), layout.nbytes, fp) is False  # the host's zeros, not the buffer
    _failed_copier(buf.clone(), fp).hand_over()
    new.prepare(layout.nbytes)
    assert new.verify(torch.zeros_like(buf), layout.nbytes, fp) is False


@pytest.mark.parametrize(("nbytes", "chunk", "threads"), [(10_007, 1_000, 3), (4_096, 4_096, 8), (5, 64, 2), (0, 8, 2)])
def test_a_copy_through_the_bounce_buffers_is_exact(nbytes: int, chunk: int, threads: int) -> None:
    src = torch.randint(0, 256, (nbytes + 3,), dtype=torch.uint8, generator=torch.Generator().manual_seed(7))
    dst = torch.zeros(nbytes + 3, dtype=torch.uint8)
    copy_from_pageable(dst, src, nbytes, chunk=chunk, threads=threads)
    assert torch.equal(dst[:nbytes], src[:nbytes])
    assert dst[nbytes:].tolist() == [0, 0, 0]  # nothing past nbytes
