"""Host buffers of the memory tier (``training.checkpoint.hostbuf``): files in a shared-memory directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.training_runs import REPO_ROOT, child_env
from training.checkpoint import hostbuf, shm_scope
from training.checkpoint.hostbuf import Slot, buffer, decode_meta, encode_meta


@pytest.fixture(autouse=True)
def _shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shm_scope.SHM_BASE_ENV, str(tmp_path / "shm"))
    (tmp_path / "shm").mkdir()


def test_a_buffer_is_mapped_once_per_process_and_its_bytes_outlive_the_process(tmp_path: Path) -> None:
    path = tmp_path / "shm" / "b.bin"
    a = buffer(path, 16)
    a[:] = torch.arange(16, dtype=torch.uint8)
    assert buffer(path, 16) is a  # the same mapping: no allocation after the first
    code = f"import torch; from training.checkpoint.hostbuf import buffer; print(buffer(__import__('pathlib').Path({str(path)!r}), 16).tolist())"  # noqa: E501
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=child_env(), capture_output=True, text=True)
    assert out.stdout.strip() == str(list(range(16)))  # another process maps the same bytes (a respawned worker)


def test_a_slot_is_valid_only_with_an_intact_meta(tmp_path: Path) -> None:
    slot = Slot(tmp_path / "shm", owner=3, index=1)
    assert slot.data_path.name == "owner3.slot1.bin" and slot.read_meta() is None
    slot.write_meta(encode_meta({"step": 10, "owner": 3}))
    assert slot.read_meta() == {"step": 10, "owner": 3}
    blob = slot.meta_path.read_bytes()
    slot.meta_path.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))  # one bit flipped
    assert slot.read_meta() is None and decode_meta(b"short") is None
    slot.write_meta(encode_meta({"step": 15, "owner": 3}))
    slot.invalidate()
    assert slot.read_meta() is None and not slot.meta_path.exists()


def test_a_forked_process_gets_its_own_process_id() -> None:
    """A worker forked by the prefork template must not take the template's (or a sibling's) snapshots for its own."""
    import os

    from training.checkpoint.hostbuf import process_id

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, process_id().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    assert len(child) == 32 and child != process_id()


def _resident_kib(path: Path) -> int:
    """The resident KiB of this process' mapping of ``path`` (/proc/self/smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(path)):
            return next(int(x.split()[1]) for x in lines[i + 1 :] if x.startswith("Rss:"))
    raise AssertionError(f"{path} is not mapped")


def test_populate_fills_the_page_tables_of_a_mapping_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostbuf, "POPULATE_CHUNK", 1 << 20)  # 8 chunks on the threads
    path = tmp_path / "slot.bin"
    t = hostbuf.buffer(path, 8 << 20, pin=False)
    assert _resident_kib(path) == 0  # reserved (posix_fallocate), not yet in this process' page tables
    assert hostbuf.populate(t) is True
    assert _resident_kib(path) == 8 << 10


def test_populate_that_the_kernel_refuses_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostbuf, "_NOTICE", [])
    t = hostbuf.buffer(tmp_path / "slot.bin", 1 << 20, pin=False)
    assert hostbuf.populate(t[1:]) is False  # not page-aligned: EINVAL, as a kernel without the advice answers
    assert hostbuf._NOTICE == [
        "MADV_POPULATE_WRITE refused (EINVAL: Linux < 5.14): the page-locking faults the pages in (stalls the loop)"
    ]
