"""The likely cause of a failed checkpoint write, from the error and the real file system's state."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from tests.helpers.training_runs import small_tmpfs
from training.checkpoint.storage import fs_state, human_bytes, likely_cause

#: What torch's zip writer raised for a full disk on an H200 (no errno anywhere).
RIDDLE = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (0, 598, 512 * 1024, 1536 * 1024, 11.7 * 2**30)] == [
        "0 B",
        "598 B",
        "512 KiB",
        "1.5 MiB",
        "11.7 GiB",
    ]


def test_an_errnoless_failure_with_less_free_space_than_the_save_needs_is_a_full_disk(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    cause = likely_cause(RIDDLE, tmp_path, needed_bytes=free + 2**30)
    assert cause is not None and cause.startswith("likely cause: the file system is full (this rank's save needed")
    assert "free of" in cause and f"at {fs_state(tmp_path).mount}" in cause  # type: ignore[union-attr]
    assert likely_cause(RIDDLE, tmp_path, needed_bytes=1) is None  # plenty of space: not the storage


def test_errnos_name_their_cause(tmp_path: Path) -> None:
    def cause(code: int) -> str:
        return str(likely_cause(OSError(code, errno.errorcode[code]), tmp_path, needed_bytes=1))

    assert "I/O error from the storage" in cause(errno.EIO)
    assert "disk quota is exceeded" in cause(errno.EDQUOT)
    assert f"no permission to write under {tmp_path}" in cause(errno.EACCES)
    assert "a quota, or one full Lustre OST" in cause(errno.ENOSPC)  # ENOSPC with free space left


def test_a_full_and_a_read_only_file_system_are_named_from_their_state(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "full", "64k") as full:
        (full / "filler").write_bytes(b"\0" * 64 * 1024)
        assert likely_cause(RIDDLE, full / "ckpt" / "step_00000001.tmp") == (
            f"likely cause: the file system is full; file system: 0 B free of 64 KiB at {full}"
        )
    with small_tmpfs(tmp_path / "ro", "64k", read_only=True) as ro:
        cause = likely_cause(OSError(errno.EROFS, "Read-only file system"), ro / "ckpt")
        state = f"64 KiB free of 64 KiB at {ro}, mounted read-only"
        assert cause == f"likely cause: the file system is mounted read-only; file system: {state}"
