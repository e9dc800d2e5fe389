"""What the worker template's imports took from the template's own process, renewed in each process forked from it
as a fresh interpreter would have it (:mod:`training.launch.prefork` imports under :func:`recording` and calls
:func:`renew` in every forked child).

- **Logging.** NVRx's ft_launcher module runs ``logging.basicConfig`` at import, with a format naming the importing
  process (``[ft_launcher<pid>@<host>]``, the template's). The handlers the imports added are removed and the root
  level restored: a launcher run as ``__main__`` configures logging again with its own pid and host (in a warm pod,
  the pod's hostname, by which :mod:`training.telemetry.exits` matches a worker's logged exit to its events), and a
  worker has no handler, as a cold one.
- **ft_launcher's IPC socket.** The launcher module names it after the importing pid (``_ft_launcher<pid>.socket``,
  NVRx 0.4.1 and 0.7.0 alike), and the rendezvous module copies that name at import; the launcher run as ``__main__``
  names it after its own pid in its workers' environment. Forked, the rendezvous listened on the template's name and
  the workers' ShutdownWorkload requests (:meth:`training.resilience.ft_monitor.FtMonitor.request_shutdown`) found no
  socket: ft_launcher restarted the workers after an unrecoverable exit until its restarts ran out.
- **The temporary directory.** :mod:`tempfile` keeps the directory it first found (``TMPDIR``) for the process, and
  ft_launcher's import asked for it in the template. A forked process looks again with its own environment, so a
  launch's private ``TMPDIR`` (:mod:`training.local`) holds its launcher's sockets and log directories, and the
  socket names above are renewed under it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

#: The module-level name NVRx gives ft_launcher's IPC socket, and the pid-bearing part of its value.
LAUNCHER_SOCKET = "FT_LAUNCHER_IPC_SOCKET"
_SOCKET_STEM = "_ft_launcher{pid}.socket"

_recorded: dict[str, Any] = {}


@contextlib.contextmanager
def recording() -> Iterator[None]:
    """Around the template's imports: note the root logger's handlers and level before, and the importing pid."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        added = [h for h in root.handlers if h not in handlers]
        _recorded.update(pid=os.getpid(), handlers=added, level=level, tempdir=tempfile.tempdir)


def renew() -> list[str]:
    """In a process forked from the template: undo what :func:`recording` saw the imports take from the template's
    process. Returns what it renewed (``logging``, ``tempfile.tempdir``, ``<module>.FT_LAUNCHER_IPC_SOCKET``)."""
    if not _recorded:
        return []
    renewed = []
    root = logging.getLogger()
    if _recorded["handlers"] or root.level != _recorded["level"]:
        for handler in _recorded["handlers"]:
            root.removeHandler(handler)
        root.setLevel(_recorded["level"])
        renewed.append("logging")
    if _recorded["tempdir"] is not None and tempfile.tempdir == _recorded["tempdir"]:
        tempfile.tempdir = None  # found again from this process's TMPDIR, as a fresh interpreter finds it
        renewed.append("tempfile.tempdir")
    old, new = _SOCKET_STEM.format(pid=_recorded["pid"]), _SOCKET_STEM.format(pid=os.getpid())
    for name, module in list(sys.modules.items()):
        if not name.startswith("nvidia_resiliency_ext"):
            continue
        value = getattr(module, "__dict__", {}).get(LAUNCHER_SOCKET)  # the module's own: no lazy __getattr__
        if isinstance(value, str) and value.endswith(old):  # NVRx: f"{tempfile.gettempdir()}/_ft_launcher{pid}..."
            setattr(module, LAUNCHER_SOCKET, os.path.join(tempfile.gettempdir(), new))
            renewed.append(f"{name}.{LAUNCHER_SOCKET}")
    return renewed
