"""The file system under a checkpoint root: its state, and the likely cause of a failed checkpoint write.

A failed write must say why from what the file system shows (free space, inodes, read-only, an I/O error), on
every save path: torch's C++ writers often lose the errno (``[enforce fail at inline_container.cc:672] .
unexpected pos 704 vs 598`` is what a full disk looked like on an H200).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from training.checkpoint.files import os_error_in

#: A write failure without an errno on a file system with less free space than this is taken for a full disk
#: (also when less is free than the save needed, see :func:`likely_cause`).
FULL_FS_BYTES = 1 << 20


def human_bytes(n: float) -> str:
    """``512 KiB``, ``11.7 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class FsState:
    """What ``statvfs`` says about the file system holding a path."""

    mount: Path
    free_bytes: int
    total_bytes: int
    free_inodes: int
    read_only: bool

    def __str__(self) -> str:
        ro = ", mounted read-only" if self.read_only else ""
        inodes = f", {self.free_inodes} inodes free" if self.free_inodes < 1000 else ""
        return f"{human_bytes(self.free_bytes)} free of {human_bytes(self.total_bytes)} at {self.mount}{inodes}{ro}"


def fs_state(path: Path) -> FsState | None:
    """The state of the file system holding ``path`` (its nearest existing ancestor); None if it cannot be read."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    mount = p
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    return FsState(
        mount=mount,
        free_bytes=st.f_bavail * st.f_frsize,
        total_bytes=st.f_blocks * st.f_frsize,
        free_inodes=st.f_favail,
        read_only=bool(st.f_flag & os.ST_RDONLY),
    )


def likely_cause(exc: BaseException, path: Path, needed_bytes: int | None = None) -> str | None:
    """``likely cause: ...; <file system state>`` for a failed write under ``path``, or None when neither the error
    nor the file system points at the storage. ``needed_bytes``: what this rank's save had to write."""
    os_error = os_error_in(exc)
    code = os_error.errno if os_error is not None else None
    state = fs_state(path)
    full = state is not None and (
        state.free_bytes < FULL_FS_BYTES or (needed_bytes is not None and state.free_bytes < needed_bytes)
    )
    need = f" (this rank's save needed {human_bytes(needed_bytes)})" if needed_bytes else ""
    if code == errno.EROFS or (state is not None and state.read_only):
        cause = "the file system is mounted read-only"
    elif code == errno.EIO:
        cause = "an I/O error from the storage (check the kernel log, dmesg, and the file system's health)"
    elif code == errno.EDQUOT:
        cause = "a disk quota is exceeded (on Lustre/FSx: lfs quota)"
    elif code in (errno.EACCES, errno.EPERM):
        cause = f"no permission to write under {path}"
    elif state is not None and code == errno.ENOSPC and state.free_inodes == 0:
        cause = "the file system is out of inodes"
    elif full:
        cause = f"the file system is full{need}"
    elif code == errno.ENOSPC:
        cause = "no space although the file system reports free space: a quota, or one full Lustre OST (lfs df)"
    elif code is None:
        return None
    else:
        cause = f"the storage failed ({errno.errorcode.get(code, code)})"
    return f"likely cause: {cause}; file system: {state if state is not None else f'no state for {path}'}"
