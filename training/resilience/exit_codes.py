"""Process exit codes per cause, escalation of repeated faults, and launcher exit translation.

Codes (all distinct; ``cfg.ft.unrecoverable_exit_code`` must not collide with them):

====  =========================  ==========================================================
 0    OK                         target step reached
 2    CONFIG                     invalid configuration or arguments
 10   FAULT_EXCEPTION            an exception (injected or real) ended the process
 11   FAULT_HANG                 a hang was detected (k8s-only: a peer's collective timed out)
 12   FAULT_OOM                  an allocation failure
 13   FAULT_COMM                 this rank broke its collective / process group
 14   PEER_LOST                  another rank failed: this rank's collective or store request
                                 timed out or its connection closed (never counted as this
                                 rank's fault; the pod's supervisor relaunches to rejoin)
 20   NO_USABLE_CHECKPOINT       checkpoints exist but none verifies (never restarts from 0)
 22   CHECKPOINT_ROOT_MISSING    the checkpoint root is missing or empty, but the run's event log records
                                 commits (an unmounted volume): never restarts from 0
 21   CHECKPOINT_WRITE           checkpoint storage failed (ENOSPC, unwritable directory, unreadable marker);
                                 also once its retries are used up (``KEEP_CODE_ON_ESCALATION``)
 N    UNRECOVERABLE              ``cfg.ft.unrecoverable_exit_code`` (default 42): the same fault
                                 repeated more than ``cfg.faults.max_repeats`` times, or a
                                 supervisor's windowed relaunch budget spent
====  =========================  ==========================================================

Kubernetes: the charts' ``podFailurePolicy`` fails the Job at once on :func:`fail_job_exit_codes`
(restarting cannot help); every other non-zero code restarts the pod (``k8s-only`` mode's recovery).

ft_launcher exits 1 whatever its workers returned once restarts are exhausted, so the process that
runs it (``training.local``, or ``python -m training.resilience.exit_codes --run-dir DIR -- ft_launcher ...`` as
the container entry) translates: a worker's ``exit_status.json`` in the run dir wins; otherwise a
non-zero launcher exit means "restarts exhausted" = unrecoverable.
"""

from __future__ import annotations

import contextlib
import json
import sys
from enum import IntEnum
from pathlib import Path

from training.common.peer_errors import is_peer_error, lost_peer_behind

# The pod's supervisor imports this module at every launcher exit (training.resilience.supervisor): what only the
# writers and the entry point use (subprocess, the atomic writes' hashlib and tempfile) is imported where used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EXIT_STATUS_FILE = "exit_status.json"
LEDGER_DIR = "faults"


class ExitCode(IntEnum):
    """Fixed exit codes; the unrecoverable code comes from the config."""

    OK = 0
    CONFIG = 2
    FAULT_EXCEPTION = 10
    FAULT_HANG = 11
    FAULT_OOM = 12
    FAULT_COMM = 13
    PEER_LOST = 14
    NO_USABLE_CHECKPOINT = 20
    CHECKPOINT_WRITE = 21
    CHECKPOINT_ROOT_MISSING = 22


CAUSE_CODES: dict[str, ExitCode] = {
    "exception": ExitCode.FAULT_EXCEPTION,
    "sigkill": ExitCode.FAULT_EXCEPTION,  # never reached: a SIGKILLed process has no exit code of its own
    "hang": ExitCode.FAULT_HANG,
    "oom": ExitCode.FAULT_OOM,
    "comm": ExitCode.FAULT_COMM,
    "peer_lost": ExitCode.PEER_LOST,
    "no_usable_checkpoint": ExitCode.NO_USABLE_CHECKPOINT,
    "checkpoint_write": ExitCode.CHECKPOINT_WRITE,
    "checkpoint_root_missing": ExitCode.CHECKPOINT_ROOT_MISSING,
    "config": ExitCode.CONFIG,
}


class UnrecoverableError(BaseException):
    """Recovery is pointless: the process must end with the unrecoverable code.

    A ``BaseException`` so that NVRx's in-process Wrapper does not treat it as a restartable fault. ``cause``:
    the cause whose exit code the process ends with (default: the unrecoverable code).
    """

    def __init__(self, reason: str, cause: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if cause is not None:
            self.cause = cause


#: Causes that keep their own exit code once their retries are used up (the storage is at fault, not training).
KEEP_CODE_ON_ESCALATION = frozenset({"checkpoint_write"})


def check_codes(unrecoverable: int) -> None:
    """Raise ``ValueError`` if the configured unrecoverable code collides with a fixed code."""
    if unrecoverable in {c.value for c in ExitCode} or unrecoverable == 1:
        raise ValueError(
            f"ft.unrecoverable_exit_code {unrecoverable} collides with a fixed exit code "
            f"({', '.join(f'{c.name}={c.value}' for c in ExitCode)}, 1 = launcher failure)"
        )


def fail_job_exit_codes(unrecoverable: int) -> list[int]:
    """Exit codes after which Kubernetes must not restart the pod (for ``podFailurePolicy``)."""
    codes = (ExitCode.NO_USABLE_CHECKPOINT, ExitCode.CHECKPOINT_ROOT_MISSING, ExitCode.CONFIG)
    return sorted({unrecoverable, *(int(c) for c in codes)})


def classify(exc: BaseException) -> str:
    """The cause name of an exception that ended training."""
    kind = getattr(exc, "fault_kind", None)
    if kind:
        return str(kind)
    name = type(exc).__name__
    text = str(exc).lower()
    if name == "NoUsableCheckpointError":
        return "no_usable_checkpoint"
    if name == "CheckpointRootMissingError":
        return "checkpoint_root_missing"
    if any(c.__name__ == "CheckpointStorageError" for c in type(exc).__mro__):  # a write, commit or read failed
        # ... because a peer stopped answering in its collective (a node lost during a save): not this rank's fault
        # (or failed on other ranks only, which were stopped or lost a peer: CheckpointPeerError)
        return "peer_lost" if name == "CheckpointPeerError" or lost_peer_behind(exc) else "checkpoint_write"
    if isinstance(exc, MemoryError) or "outofmemory" in name.lower() or "can't allocate memory" in text:
        return "oom"
    if is_peer_error(exc):
        return "peer_lost"
    return "exception"


def exit_code_for(cause: str, unrecoverable: int) -> int:
    """The exit code of a cause name (``unrecoverable`` for "unrecoverable")."""
    if cause == "unrecoverable":
        return unrecoverable
    return int(CAUSE_CODES.get(cause, ExitCode.FAULT_EXCEPTION))


def write_exit_status(
    run_dir: Path,
    code: int,
    cause: str,
    message: str,
    rank: int,
    *,
    overwrite: bool = True,
    keep_codes: frozenset[int] = frozenset(),
    final: bool = False,
) -> None:
    """Record why a worker ended (read by :func:`translate_launcher_exit`); the latest record wins unless
    ``overwrite`` is False (a consequence of another rank's failure must not hide that rank's cause), and never over
    a record whose code is in ``keep_codes`` (the "fail the Job" codes: a peer's later error must not mask them).
    ``final``: the worker asked the launcher not to restart (its code is the job's, whatever the launcher exits)."""
    path = Path(run_dir) / EXIT_STATUS_FILE
    if path.exists():
        previous = read_exit_status(run_dir)
        if not overwrite or (previous is not None and int(previous.get("code", 0)) in keep_codes):
            return
    from training.common.files import atomic_write_json

    atomic_write_json(path, {"code": code, "cause": cause, "message": message, "rank": rank, "final": final})


def read_exit_status(run_dir: Path) -> dict[str, Any] | None:
    """The recorded exit status of a run, if any."""
    path = Path(run_dir) / EXIT_STATUS_FILE
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def clear_exit_status(run_dir: Path) -> None:
    """Forget the previous launch's exit status (call before starting a launcher)."""
    with contextlib.suppress(FileNotFoundError):
        (Path(run_dir) / EXIT_STATUS_FILE).unlink()


def translate_launcher_exit(
    launcher_rc: int, run_dir: Path, unrecoverable: int, restarts_exhausted: bool
) -> tuple[int, str]:
    """Map a launcher's exit code to the job's exit code and a message naming the cause.

    ``restarts_exhausted``: the launcher restarts workers itself (ft_launcher), so a non-zero exit
    means its restarts are used up: unrecoverable. Otherwise (torchrun, k8s-only mode) the worker's
    recorded cause code is passed through so that Kubernetes restarts the pod.
    """
    if launcher_rc == 0:
        return 0, "completed"
    status = read_exit_status(run_dir)
    fail_job = fail_job_exit_codes(unrecoverable)
    if status is not None and (int(status["code"]) in fail_job or not restarts_exhausted or status.get("final")):
        return int(status["code"]), f"{status['cause']}: {status['message']} (rank {status['rank']})"
    last = f"; last failure: {status['cause']}: {status['message']}" if status else ""
    if restarts_exhausted:
        return unrecoverable, f"launcher exited with {launcher_rc}: worker restarts exhausted (unrecoverable){last}"
    return launcher_rc, f"launcher exited with {launcher_rc} and no worker recorded a cause"


class FailureLedger:
    """Per-rank count of failures by (cause, step, phase), persisted in ``<run_dir>/faults/``.

    The same failure seen more than ``max_repeats`` times escalates to :class:`UnrecoverableError`.
    Files are per rank so that ranks never race on one file; writes are atomic (rename).
    """

    def __init__(self, run_dir: Path, rank: int, max_repeats: int) -> None:
        self.path = Path(run_dir) / LEDGER_DIR / f"failures.rank{rank}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.max_repeats = max_repeats

    def counts(self) -> dict[str, int]:
        try:
            return json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    @staticmethod
    def key(cause: str, step: int, phase: str = "step") -> str:
        return f"{cause}@{step}/{phase}"

    def record(self, cause: str, step: int, phase: str = "step") -> int:
        """Count one more occurrence; returns the new count (persisted before returning)."""
        counts = self.counts()
        key = self.key(cause, step, phase)
        counts[key] = counts.get(key, 0) + 1
        from training.common.files import atomic_write_json

        atomic_write_json(self.path, counts)
        return counts[key]

    def _escalated(self) -> tuple[str, str] | None:
        """(key, reason) of the first failure that repeated more than ``max_repeats`` times, if any."""
        for key, n in sorted(self.counts().items()):
            if n > self.max_repeats:
                return key, f"{key} on rank {self.rank} failed {n} times (> faults.max_repeats={self.max_repeats})"
        return None

    def escalation(self) -> str | None:
        """A reason string if some failure repeated more than ``max_repeats`` times, else None."""
        found = self._escalated()
        return found[1] if found else None

    def check(self) -> None:
        """Raise :class:`UnrecoverableError` when a failure repeated too often; a cause in
        :data:`KEEP_CODE_ON_ESCALATION` keeps its exit code (e.g. 21: the storage kept failing)."""
        found = self._escalated()
        if found:
            cause = found[0].split("@", 1)[0]
            raise UnrecoverableError(found[1], cause=cause if cause in KEEP_CODE_ON_ESCALATION else None)


def main(argv: list[str] | None = None) -> int:
    """``python -m training.resilience.exit_codes --run-dir DIR [--unrecoverable N] [--no-restarts] -- CMD...``."""
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print(
            "usage: python -m training.resilience.exit_codes --run-dir DIR [--unrecoverable N] -- CMD...",
            file=sys.stderr,
        )
        return int(ExitCode.CONFIG)
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="training.resilience.exit_codes", description=main.__doc__)
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--unrecoverable", type=int, default=None, help="default: cfg.ft.unrecoverable_exit_code")
    parser.add_argument("--no-restarts", action="store_true", help="the launcher does not restart workers (torchrun)")
    args = parser.parse_args(argv[:split])
    if args.unrecoverable is None:
        from platform_config import load_config

        args.unrecoverable = load_config().ft.unrecoverable_exit_code
    clear_exit_status(args.run_dir)
    import subprocess

    rc = subprocess.call(argv[split + 1 :])
    code, message = translate_launcher_exit(rc, args.run_dir, args.unrecoverable, not args.no_restarts)
    print(f"[exit_codes] launcher rc={rc} -> exit {code}: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
