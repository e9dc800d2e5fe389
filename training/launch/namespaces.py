"""Join another process's Linux namespaces and root directory, as ``nsenter --target PID --all --root`` does.

For the local cluster's warm pods (:mod:`training.launch.prefork`): a template outside a pod forks a child that
becomes the pod's template. The child joins the pod's IPC, UTS, network, PID and mount namespaces, then its root
(the pod's ``chroot``). Joining a PID namespace only places the caller's *children* in it, so the caller forks once
more afterwards. ``setns`` of a mount namespace needs a single-threaded caller, and all of it needs root.
Python 3.11 has no ``os.setns``, so this calls the C library's.
"""

from __future__ import annotations

import ctypes
import os

#: The namespaces joined, in ``nsenter``'s order (the mount namespace last but the root): their ``CLONE_NEW*`` flag.
KINDS = {"ipc": 0x08000000, "uts": 0x04000000, "net": 0x40000000, "pid": 0x20000000, "mnt": 0x00020000}


def differing(pid: int) -> list[str]:
    """The namespaces of :data:`KINDS` in which ``pid`` is not where this process is."""
    return [k for k in KINDS if os.readlink(f"/proc/{pid}/ns/{k}") != os.readlink(f"/proc/self/ns/{k}")]


def enter(pid: int) -> list[str]:
    """Join the namespaces of ``pid`` that differ from this process's, then take its root directory; returns the
    namespaces joined. The working directory is left at the new root: the caller sets its own.

    Raises ``OSError`` (the namespace in the message) when a ``setns`` fails; by then some may have been joined, so
    the caller should be a fork that exits on failure."""
    libc = ctypes.CDLL(None, use_errno=True)
    kinds = differing(pid)
    fds = {k: os.open(f"/proc/{pid}/ns/{k}", os.O_RDONLY | os.O_CLOEXEC) for k in kinds}
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # before the mounts change
    try:
        for kind, fd in fds.items():
            if libc.setns(fd, KINDS[kind]) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into the {kind} namespace of pid {pid}: {os.strerror(err)}")
        os.fchdir(root)
        os.chroot(".")
    finally:
        for fd in (*fds.values(), root):
            os.close(fd)
    return kinds
