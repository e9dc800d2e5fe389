"""The pod supervisor's decision after its launcher exited: end the pod (with which code), or relaunch in place.

The training container's PID 1 is a small bash loop (``charts.launch_command.supervisor_script``). Each worker's
wrapper appends a line to a node-local exit log (``<unix time> <launcher restart count> <local rank> <exit code>``);
when the launcher exits, the loop runs ``python -m training.resilience.supervisor decide`` and does what it prints:
``exit N`` or ``relaunch``. Rules, first match wins:

1. the launcher succeeded and every local worker (``--nproc``) of the last generation exited 0 -> ``exit 0``;
2. a worker exited with a "fail the Job" code -> ``exit`` that code (``podFailurePolicy`` FailJob);
3. the supervisor stopped the launcher because the rendezvous host (index 0) was replaced (its address changed) ->
   ``relaunch`` to join the new host while the budget lasts (what the stopped workers reported does not count);
4. a worker of the last worker generation failed on its own (any code but 0, 14 = a lost peer, 143 = stopped by its
   launcher: a fault code 10-13 or 21, SIGKILL by the OOM killer or a hang detector, a crash) -> with ft_launcher,
   whose own restarts are then used up, ``relaunch`` a fresh launcher if the budget still holds this launch's
   failures; otherwise ``exit`` that code, and Kubernetes replaces the pod (counted);
5. no worker ran in this launch and the launcher gave up after its rendezvous join timeout: a lost peer's
   replacement has not joined yet (a new node takes minutes) -> ``relaunch`` without charging the budget, until the
   wait, counted from the first launch that found no peers, passes ``job.lost_peer_deadline_s`` (the user's bound
   on a node loss) -> ``exit`` with the unrecoverable code. A lost node, the rendezvous host's included, thus never
   fails the Job before that deadline, however many join timeouts the wait takes;
6. anything else - every worker reported a lost peer or was stopped by its launcher, or the launcher failed before
   or between worker generations - is another pod's failure: ``relaunch`` to rejoin the rendezvous while the budget
   lasts, else ``exit`` with the unrecoverable code (the Job fails, saying why).

The budget (``job.relaunch``) is charged one per relaunch and one per local worker failure a relaunch follows,
counted in a sliding window: a long run with rare faults never spends it, a crash loop does. The history lives in a
node-local file, so it survives the launcher but not the pod (a replacement pod starts with a fresh budget, and
Kubernetes counts the pod failure itself).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NamedTuple

from training.resilience.exit_codes import ExitCode, fail_job_exit_codes

#: Worker exits that say nothing against this node: success, a lost peer, stopped by its launcher (SIGTERM). Any
#: other code (a fault code 10-13 or 21, SIGKILL by the OOM killer or a hang detector, a crash) is a local fault.
NOT_LOCAL = frozenset({0, int(ExitCode.PEER_LOST), 128 + 15})


# Named tuples rather than dataclasses: the bash loop starts this module at every launcher exit, and dataclasses
# imports inspect.
class WorkerExit(NamedTuple):
    ts: float
    restart: int
    local_rank: int
    code: int


class Decision(NamedTuple):
    action: str  # "exit" | "relaunch"
    code: int
    reason: str
    #: Times to add to the budget's history (a relaunch, and each local worker failure it follows).
    charge: tuple[float, ...] = ()

    def line(self) -> str:
        """What the bash loop reads: ``relaunch <reason>`` or ``exit <code> <reason>``."""
        return f"relaunch {self.reason}" if self.action == "relaunch" else f"exit {self.code} {self.reason}"


def read_exits(path: Path) -> list[WorkerExit]:
    """The exit log; malformed lines (a write cut short) are skipped."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        parts = line.split()
        try:
            out.append(WorkerExit(float(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
        except (IndexError, ValueError):
            continue
    return out


def read_history(path: Path) -> list[float]:
    try:
        return [float(x) for x in path.read_text().split()]
    except (FileNotFoundError, ValueError):
        return []


def decide(
    launcher_rc: int,
    exits: list[WorkerExit],
    history: list[float],
    now: float,
    *,
    unrecoverable: int,
    restarts_in_job: bool,
    max_in_window: int,
    window_s: float,
    nproc: int = 1,
    host_moved: bool = False,
    launch_s: float = 0.0,
    join_timeout_s: float = float("inf"),
    waiting_since: float | None = None,
    deadline_s: float = float("inf"),
) -> Decision:
    """The supervisor's rules (module docstring) as a pure function."""
    last = max((e.restart for e in exits), default=None)
    failed_last = [e for e in exits if e.restart == last and e.code != 0]
    succeeded_last = {e.local_rank for e in exits if e.restart == last and e.code == 0}
    # Success is every local worker of the last generation exiting 0, not the launcher's word: NVRx 0.4.1's
    # ft_launcher exits 0 when its restarts ran out on one rank while the others succeeded, and when the rendezvous
    # host closed the rendezvous on its way out (a pod that ended then would never rejoin its Job's next round).
    if launcher_rc == 0 and not host_moved and not failed_last and len(succeeded_last) >= nproc:
        return Decision("exit", 0, "training completed")
    fail_job = set(fail_job_exit_codes(unrecoverable))
    for e in exits:
        if e.code in fail_job:
            return Decision("exit", e.code, f"worker (local rank {e.local_rank}) exited {e.code}: fail the Job")
    local = [e for e in failed_last if e.code not in NOT_LOCAL]
    recent = [t for t in history if now - t < window_s]
    spent = f"{len(recent)} charged in the last {window_s:g} s (job.relaunch.max_in_window = {max_in_window})"
    why = "the rendezvous host was replaced" if host_moved else f"a peer was lost (launcher exit {launcher_rc})"
    if local and not host_moved:
        first = min(local, key=lambda e: e.ts)
        what = f"local rank {first.local_rank} failed with {first.code}"
        if not restarts_in_job:
            return Decision("exit", first.code, f"{what}: Kubernetes replaces this pod")
        # ft_launcher used up its restarts. A fresh launcher if its failures were rare (every local failure of the
        # launch is charged), else Kubernetes replaces the pod (perhaps onto a healthier node).
        failures = sorted(e.ts for e in exits if e.code not in NOT_LOCAL)
        if len(recent) + len(failures) + 1 <= max_in_window:
            return Decision(
                "relaunch", 0, f"{what} after the launcher's restarts were used up; {spent}", (*failures, now)
            )
        return Decision("exit", first.code, f"{what}, too often for a relaunch ({spent}): Kubernetes replaces this pod")
    if not exits and not host_moved and launcher_rc != 0 and launch_s >= join_timeout_s:
        waited = now - (now if waiting_since is None else waiting_since)
        if waited < deadline_s:
            return Decision(
                "relaunch",
                0,
                f"no peer joined within the {join_timeout_s:g} s join timeout; waiting for a lost peer's replacement "
                f"for {waited:.0f} s of job.lost_peer_deadline_s = {deadline_s:g} (not charged)",
            )
        return Decision(
            "exit",
            unrecoverable,
            f"a lost peer's replacement did not join within job.lost_peer_deadline_s = {deadline_s:g} s",
        )
    if len(recent) < max_in_window:
        return Decision("relaunch", 0, f"{why}; {spent}", (now,))
    return Decision("exit", unrecoverable, f"{why}, too often: {spent}")


def main(argv: list[str] | None = None) -> int:
    """``decide --exits FILE --history FILE --rc N --unrecoverable N --max-in-window N --window-s S [--in-job]``."""
    p = argparse.ArgumentParser(prog="python -m training.resilience.supervisor", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("decide", help="print 'exit N reason' or 'relaunch reason'; records a relaunch in --history")
    d.add_argument("--exits", type=Path, required=True)
    d.add_argument("--history", type=Path, required=True)
    d.add_argument("--rc", type=int, required=True, help="the launcher's exit code")
    d.add_argument("--unrecoverable", type=int, required=True)
    d.add_argument("--max-in-window", type=int, required=True)
    d.add_argument("--window-s", type=float, required=True)
    d.add_argument("--in-job", action="store_true", help="the launcher restarts workers itself (ft_launcher)")
    d.add_argument("--nproc", type=int, required=True, help="workers per pod: all must have exited 0 for success")
    d.add_argument(
        "--host-moved",
        type=int,
        default=0,
        help="1: the supervisor stopped the launcher because the rendezvous host was replaced",
    )
    d.add_argument("--launch-s", type=float, default=0.0, help="how long the launcher ran")
    d.add_argument("--join-timeout-s", type=float, default=float("inf"), help="the rendezvous join timeout")
    d.add_argument(
        "--waiting-since", default="", help="unix time of the first launch that found no peers ('' = this one)"
    )
    d.add_argument("--deadline-s", type=float, default=float("inf"), help="job.lost_peer_deadline_s")
    args = p.parse_args(argv)
    now = time.time()
    history = read_history(args.history)
    decision = decide(
        args.rc,
        read_exits(args.exits),
        history,
        now,
        unrecoverable=args.unrecoverable,
        restarts_in_job=args.in_job,
        max_in_window=args.max_in_window,
        window_s=args.window_s,
        nproc=args.nproc,
        host_moved=bool(args.host_moved),
        launch_s=args.launch_s,
        join_timeout_s=args.join_timeout_s,
        waiting_since=float(args.waiting_since) if args.waiting_since else None,
        deadline_s=args.deadline_s,
    )
    if decision.charge:
        args.history.write_text(" ".join(f"{t:.3f}" for t in [*history, *decision.charge]) + "\n")
    print(decision.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
