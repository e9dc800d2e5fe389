"""Why a worker died without an event: its exit status as the launcher logged it.

A worker killed by a signal (the OOM killer's SIGKILL, a hang detector, an operator) writes nothing; its launcher
does. torchrun and ft_launcher log every failed worker as
``failed (exitcode: -9) local_rank: 1 (pid: 19389) of binary: ...`` (ft_launcher's lines also name the host:
``[ft_launcher19378@vm]``), and their error summary as ``exitcode : -9 (pid: 19389)``. Runs keep that output in
``RUN_DIR/launcher.log`` (``python -m training.local``) and ``RUN_DIR/pods/<pod>.log`` (the local cluster). The pid
matches the ``pid`` of the worker's events (both in the pod's PID namespace on Kubernetes).
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

#: Files of a run directory that hold launcher output.
LAUNCHER_LOGS = ("launcher.log", "pods/*.log")
_FAILED = re.compile(r"exitcode\s*:\s*(-?\d+)\)?\s*(?:local_rank:\s*(\d+)\s*)?\(pid:\s*(\d+)\)")
_HOST = re.compile(r"\[[A-Za-z_]+\d+@([^\]\s]+)\]")


@dataclass(frozen=True)
class WorkerExit:
    """A worker's end as its launcher logged it."""

    pid: int
    code: int  # negative: killed by that signal (torch's convention)
    host: str | None
    source: str  # "<file>:<line>: <text>"

    @property
    def cause(self) -> str:
        """``sigkill``, ``sigsegv``, ... for a signal (also bash's 128+N), else ``exit_<code>``."""
        sig = -self.code if self.code < 0 else self.code - 128 if 128 < self.code < 160 else None
        if sig is not None:
            try:
                return signal.Signals(sig).name.lower()
            except ValueError:
                return f"signal_{sig}"
        return f"exit_{self.code}"


def parse_launcher_log(text: str, name: str = "launcher.log") -> list[WorkerExit]:
    """Every failed-worker line of one launcher log, in file order."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _FAILED.search(line)
        if m is None:
            continue
        host = _HOST.search(line)
        out.append(WorkerExit(int(m.group(3)), int(m.group(1)), host.group(1) if host else None, f"{name}:{n}: {line}"))
    return out


def read_worker_exits(run_dir: str | os.PathLike[str]) -> list[WorkerExit]:
    """The failed workers that the launcher logs of ``run_dir`` name (none when there are no logs)."""
    root = Path(run_dir)
    out: list[WorkerExit] = []
    for pattern in LAUNCHER_LOGS:
        for path in sorted(root.glob(pattern)):
            out += parse_launcher_log(path.read_text(errors="replace"), str(path.relative_to(root)))
    return out


def find_exit(exits: list[WorkerExit], pid: int | None, host: str | None) -> WorkerExit | None:
    """The logged exit of the process ``pid`` on ``host``: a line naming another host does not match; the first
    line wins (the summary repeats it)."""
    if pid is None:
        return None
    return next((x for x in exits if x.pid == pid and (x.host is None or host is None or x.host == host)), None)
