"""The final save of a drain: when the pod's SIGTERM reaches some ranks, every rank stops at the same step
boundary, saves that step if the time left allows and waits for its commit, then leaves (:class:`Terminated` on the
ranks that had the SIGTERM, :class:`PeerTerminated` on the others). Only the pod supervisor's drain mark makes a
SIGTERM a drain (:func:`training.resilience.sigterm.draining`).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import torch
import torch.distributed as dist

from training.resilience import sigterm


class Progress(Protocol):
    """The trainer's storage progress (``training.trainer.StorageProgress``), as the final save uses it."""

    last_save_s: float | None

    def save_target(self, step: int, state: Any) -> None: ...


class Stopping(Protocol):
    """The trainer, as the final save uses it."""

    progress: Progress | None
    state: Any
    rank: int
    world_size: int
    device: torch.device


def final_save_plan(step: int, elapsed_s: float, estimate_s: float, budget_s: float) -> tuple[bool, str]:
    """Whether the final save of ``step`` on SIGTERM is made, and the log line saying why. ``elapsed_s``: the longest
    time any rank has had its SIGTERM (agreed); ``estimate_s``: the longest any rank's last save took, begin to commit
    (agreed; 0: none measured in this attempt); ``budget_s``: :func:`training.resilience.sigterm.stop_budget_s`."""
    left = budget_s - elapsed_s
    if estimate_s <= 0:
        if left <= 0:
            return False, f"no final save of step {step}: its budget of {budget_s:g} s after SIGTERM is spent"
        return True, (
            f"final save of step {step}: no save measured in this attempt, trying within the {left:.1f} s left of "
            f"the {budget_s:g} s budget after SIGTERM"
        )
    if estimate_s > left:
        return False, (
            f"the final save of step {step} cannot fit: the last save took {estimate_s:.1f} s, {left:.1f} s are left "
            f"of the {budget_s:g} s budget after SIGTERM (terminationGracePeriodSeconds = the checkpoint section "
            "timeout, or the launcher's stop timeout); not made, the replacement resumes from the newest committed "
            "save"
        )
    return True, (
        f"final save of step {step}: the last save took {estimate_s:.1f} s, {left:.1f} s are left of the "
        f"{budget_s:g} s budget after SIGTERM"
    )


def stop(trainer: Stopping, step: int, stopping: int) -> None:
    """Every rank at the step boundary where ``stopping`` ranks had a SIGTERM: agree on the plan (the longest elapsed
    time, the longest last save), save ``step`` and wait for its commit if it fits, then raise :class:`Terminated`
    (this rank had the SIGTERM) or :class:`PeerTerminated` (another rank had it). Collective."""
    assert trainer.progress is not None
    stop = sigterm.request()
    stop.reached_boundary()
    agreed = torch.tensor([stop.elapsed(), trainer.progress.last_save_s or 0.0], device=trainer.device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    elapsed, estimate = agreed.tolist()
    fits, why = final_save_plan(step, elapsed, estimate, stop.budget_s)
    if trainer.rank == 0:
        print(f"[trainer] SIGTERM reached {stopping} of {trainer.world_size} ranks by step {step}: {why}", flush=True)
    if fits:
        t0 = time.monotonic()
        trainer.progress.save_target(step, trainer.state)
        if trainer.rank == 0:
            took = time.monotonic() - t0
            print(
                f"[trainer] final save of step {step} committed {took:.1f} s later, {elapsed + took:.1f} s after the "
                "first SIGTERM",
                flush=True,
            )
    if stop.requested_at is not None:
        raise sigterm.Terminated(f"SIGTERM: stopped after step {step}" + (" and its final save" if fits else ""))
    raise sigterm.PeerTerminated(
        f"{stopping} rank(s) had a SIGTERM (a drained node): stopped after step {step}"
        + (" and its final save" if fits else "")
    )
