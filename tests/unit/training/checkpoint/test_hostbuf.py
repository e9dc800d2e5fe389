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
    assert buffer(path, 16).data_ptr() == a.data_ptr()  # the same mapping: no allocation after the first
    code = (
        "from pathlib import Path; from training.checkpoint.hostbuf import buffer; "
        f"print(buffer(Path({str(path)!r}), 8).tolist(), Path({str(path)!r}).stat().st_size)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=child_env(), capture_output=True, text=True)
    # another process maps the same bytes (a respawned worker); asking for fewer, it reads the first, the file unchanged
    assert out.stdout.strip() == f"{list(range(8))} 16"


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


def test_readying_a_buffer_is_timed_by_part(tmp_path: Path) -> None:
    hostbuf.take_times()
    buffer(tmp_path / "shm" / "timed.bin", 1 << 20)
    times = hostbuf.take_times()
    assert times.keys() >= {"reserve"} and times["reserve"] > 0
    assert hostbuf.take_times() == {}  # taken: the next call starts from nothing


def test_a_longer_file_or_mapping_is_used_as_it_is_and_a_shorter_one_replaced(tmp_path: Path) -> None:
    path = tmp_path / "shm" / "slot.bin"
    whole = buffer(path, 64)
    whole[:] = torch.arange(64, dtype=torch.uint8)
    part = buffer(path, 16)  # a snapshot smaller than the slot readied: its first bytes, nothing mapped again
    assert part.numel() == 16 and part.data_ptr() == whole.data_ptr() and path.stat().st_size == 64
    longer = buffer(path, 128)  # longer than the file: a new one
    assert longer.numel() == 128 and path.stat().st_size == 128 and longer[:64].tolist() == [0] * 64


def test_threads_mapping_the_same_slot_at_once_get_one_mapping(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "shm" / "shared.bin"
    with ThreadPoolExecutor(8) as pool:
        views = list(pool.map(lambda _: buffer(path, 4096), range(8)))
    assert len({v.data_ptr() for v in views}) == 1  # one mapping, made once
    assert path.stat().st_size == 4096 and hostbuf._MAPPED[path][1].data_ptr() == views[0].data_ptr()
