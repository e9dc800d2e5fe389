"""Page-locking the memory tier's host slots (``training.checkpoint.pinning``) and the copies cut at its pieces."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from training.checkpoint import hostbuf, pinning


def _resident_kib(path: Path) -> int:
    """The resident KiB of this process' mapping of ``path`` (/proc/self/smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(path)):
            return next(int(x.split()[1]) for x in lines[i + 1 :] if x.startswith("Rss:"))
    raise AssertionError(f"{path} is not mapped")


def test_populate_fills_the_page_tables_of_a_mapping_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pinning, "POPULATE_CHUNK", 1 << 20)  # 8 chunks on the threads
    path = tmp_path / "slot.bin"
    t = hostbuf.buffer(path, 8 << 20, pin=False)
    assert _resident_kib(path) == 0  # reserved (posix_fallocate), not yet in this process' page tables
    assert pinning.populate(t) is True
    assert _resident_kib(path) == 8 << 10


def test_populate_that_the_kernel_refuses_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pinning, "_NOTICE", [])
    t = hostbuf.buffer(tmp_path / "slot.bin", 1 << 20, pin=False)
    assert pinning.populate(t[1:]) is False  # not page-aligned: EINVAL, as a kernel without the advice answers
    assert pinning._NOTICE == [
        "MADV_POPULATE_WRITE refused (EINVAL: Linux < 5.14): the page-locking faults the pages in (stalls the loop)"
    ]


@pytest.fixture
def pieces(monkeypatch: pytest.MonkeyPatch) -> torch.Tensor:
    """A 1000-byte buffer registered as pieces of 256 bytes (as :func:`pinning.pin` records them on CUDA)."""
    monkeypatch.setattr(pinning, "PIN_PIECE", 256)
    monkeypatch.setattr(pinning, "_PIECES", {})
    buf = torch.zeros(1000, dtype=torch.uint8)
    pinning._PIECES[buf.data_ptr()] = buf.numel()
    return buf


def test_cuts_are_the_pieces_borders_inside_a_view(pieces: torch.Tensor) -> None:
    assert pinning.cuts(pieces) == [256, 512, 768]
    assert pinning.cuts(pieces[100:900]) == [156, 412, 668]
    assert pinning.cuts(pieces[300:500]) == []  # within one piece
    assert pinning.cuts(pieces[100:900].view(torch.float32)) == [156, 412, 668]  # in bytes, whatever the dtype
    assert pinning.cuts(torch.zeros(1000, dtype=torch.uint8)) == []  # not a pinned mapping


class _Recorder:
    """Records the byte length of every copy that :func:`pinning.copy` makes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lengths: list[int] = []
        real = torch.Tensor.copy_

        def copy_(t: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
            self.lengths.append(t.numel() * t.element_size())
            return real(t, src, non_blocking=non_blocking)

        monkeypatch.setattr(torch.Tensor, "copy_", copy_)


def test_a_copy_into_the_pieces_is_cut_at_their_borders_and_exact(
    pieces: torch.Tensor, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = torch.arange(200, dtype=torch.float32)
    rec = _Recorder(monkeypatch)
    pinning.copy(pieces[100:900].view(torch.float32), src)
    assert rec.lengths == [156, 256, 256, 132]  # no copy crosses a border
    assert torch.equal(pieces[100:900].view(torch.float32), src)


def test_a_copy_out_of_the_pieces_into_a_strided_tensor_is_exact(pieces: torch.Tensor) -> None:
    values = torch.arange(200, dtype=torch.float32)
    pieces[100:900].view(torch.float32).copy_(values)
    out = torch.zeros(20, 10).t()  # not contiguous: filled through a contiguous copy
    pinning.copy(out, pieces[100:900].view(torch.float32).view(10, 20))
    assert torch.equal(out, values.view(10, 20))


def test_a_cut_copy_of_unlike_tensors_is_refused(pieces: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="tensors alike"):
        pinning.copy(pieces[100:900].view(torch.float32), torch.zeros(200, dtype=torch.float64))


def test_without_cuda_pinning_registers_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    t = hostbuf.buffer(tmp_path / "cpu.bin", 1 << 20, pin=False)
    assert pinning.pin(t) == pinning.PinTimes() and pinning.cuts(t) == []
