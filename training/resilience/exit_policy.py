"""How a worker leaves: the exit code and cause of a training function that ended (:func:`exit_policy`), and its
record for the launcher and the pod's supervisor (:func:`record_exit`)."""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from training.resilience.exit_codes import (
    UnrecoverableError,
    classify,
    exit_code_for,
    fail_job_exit_codes,
    write_exit_status,
)
from training.resilience.inprocess import RestartTracker, is_restart_abort
from training.resilience.sigterm import TERMINATED_EXIT_CODE, Terminated

#: Failures that fail the Job instead of restarting it.
FINAL_CAUSES = ("unrecoverable", "config", "no_usable_checkpoint", "checkpoint_root_missing")


@dataclass
class Exit:
    """How a worker leaves: its exit code and cause; ``primary``: this rank's cause is the run's (not a consequence
    of another rank's fault); ``final``: fail the Job, ask ft_launcher not to restart."""

    code: int = 0
    cause: str = "completed"
    message: str = ""
    primary: bool = True
    final: bool = False


def exit_policy(
    err: BaseException | None,
    tracker: RestartTracker,
    *,
    completed: bool,
    ft_launcher: bool,
    rank: int,
    unrecoverable: int,
) -> Exit:
    """The exit of a worker whose training function ended with ``err`` (None: it returned). ``tracker``: what the
    in-process Wrapper ended on; ``completed``: the target step was reached and saved; ``ft_launcher``: print the
    traceback of a plain failure (the launcher's log keeps it)."""
    if err is None:
        return Exit()
    if isinstance(err, UnrecoverableError):
        cause = getattr(err, "cause", "unrecoverable")
        out = Exit(exit_code_for(cause, unrecoverable), cause, err.reason, final=True)
    elif isinstance(err, Terminated):
        out = Exit(TERMINATED_EXIT_CODE, "terminated", str(err), primary=False)
    elif is_restart_abort(err) or tracker.abort_cause is not None:
        # NVRx's Wrapper may raise a teardown error of its own on top of the RestartAbort our initialize raised (its
        # store's host gone, say; the bytes initial rank that broke every node loss's teardown is fixed in
        # training.resilience.inprocess.fix_initial_ranks): the tracker knows the Wrapper ended because of that
        # abort. Ranks were lost (another pod's failure) or restarts came too fast: neither fails the Job here. The
        # lost peer's pod is replaced and this one rejoins; a rate budget hands the fault to the next layer.
        if tracker.abort_cause == "peer_lost":
            cause = "peer_lost"
        else:
            cause = tracker.cause if tracker.cause not in (None, "peer_lost") else "exception"
        reason = tracker.abort_reason
        if reason is None or is_restart_abort(err):
            message = f"in-process layer stopped: {reason or err}"
        else:  # the abort's reason, then what NVRx's teardown raised on top of it
            message = f"in-process layer stopped: {reason} (then, tearing down: {type(err).__name__}: {err})"
        # primary=False: usually a consequence of another rank leaving: keep that rank's cause
        out = Exit(exit_code_for(cause, unrecoverable), cause, message, primary=False)
    else:
        cause = classify(err)
        if ft_launcher or not isinstance(err, Exception):
            traceback.print_exception(err)
        out = Exit(exit_code_for(cause, unrecoverable), cause, f"{type(err).__name__}: {err}")
    out.final = out.final or out.cause in FINAL_CAUSES
    if out.code and completed:
        # Training reached its target and its final state is saved: an error while tearing down (NVRx's Wrapper
        # talking to a store whose host, a pod that already finished, is gone; the launcher's SIGTERM as it leaves)
        # must not turn the success into a lost peer, which would send this pod back to a rendezvous nobody hosts.
        print(f"[train] rank {rank}: completed; ignoring a teardown error ({out.cause}): {out.message}", flush=True)
        return Exit()
    return out


def record_exit(out: Exit, run_dir: Path, rank: int, unrecoverable: int) -> None:
    """Say a failed exit on stderr and record it in ``exit_status.json`` (a primary cause overwrites another rank's;
    a Job-failing code is kept). The record is a courtesy to the supervisor: the exit code still says it all."""
    msg = f"[train] rank {rank}: exiting with code {out.code} ({out.cause}): {out.message}"
    print(msg, file=sys.stderr, flush=True)
    keep = frozenset(fail_job_exit_codes(unrecoverable))
    try:
        write_exit_status(
            run_dir, out.code, out.cause, out.message[:2000], rank, overwrite=out.primary, keep_codes=keep,
            final=out.final,
        )  # fmt: skip
    except OSError as err:
        print(f"[train] rank {rank}: could not record the exit status: {err}", file=sys.stderr, flush=True)
