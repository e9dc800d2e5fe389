"""Optimal checkpoint interval (Young 1974, Daly 2006) from the measured checkpoint cost and failure rate.

With checkpoint cost ``δ`` (seconds the training loop loses per checkpoint) and mean time between failures
``M`` (seconds):

* Young: ``τ = sqrt(2·δ·M)``
* Daly (higher order): ``τ = sqrt(2·δ·M)·[1 + (1/3)·sqrt(δ/(2M)) + (1/9)·(δ/(2M))] - δ`` for ``δ < 2M``, else ``τ = M``

``τ`` is compute time between checkpoints; :func:`advise` also expresses it in optimizer steps. ``δ`` is the mean
stall of a save (the time the loop waited: staging for an asynchronous save, write and commit for a synchronous
one, plus any wait for the previous write), and an asynchronous interval is never shorter than the mean write time
(a shorter one only moves the wait into back-pressure). ``M`` is the run's wall time / its real (not injected)
faults when there are :data:`MIN_REAL_FAULTS` or more, else ``observability.node_mtbf_hours`` / the node count, else
wall time / injected faults (with a warning: an injected rate says nothing about the cluster). The two formulas live
in :mod:`training.whatif.interval`, shared with the goodput planner.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

from training.telemetry.analysis import RunAnalysis
from training.whatif.interval import daly_interval, require_positive, young_interval

#: Real faults a run needs before its own failure rate replaces the configured node MTBF.
MIN_REAL_FAULTS = 3

__all__ = ["Advice", "advise", "advise_for_run", "daly_interval", "expected_waste_fraction", "young_interval"]


def expected_waste_fraction(interval_s: float, delta_s: float, mtbf_s: float, restart_s: float = 0.0) -> float:
    """First-order expected fraction of time lost: ``δ/τ`` to checkpoints, ``τ/(2M)`` to rework, ``R/M`` to restarts.

    Minimised by Young's interval; an estimate for comparing intervals, not a prediction.
    """
    require_positive(delta_s, mtbf_s)
    if interval_s <= 0:
        raise ValueError("interval_s must be positive")
    return delta_s / interval_s + interval_s / (2.0 * mtbf_s) + restart_s / mtbf_s


@dataclass(frozen=True)
class Advice:
    """A suggested checkpoint interval and the inputs it came from."""

    interval_s: float | None
    interval_steps: int | None
    young_interval_s: float | None
    young_interval_steps: int | None
    current_interval_steps: int | None
    expected_waste_current: float | None
    expected_waste_suggested: float | None
    checkpoint_cost_s: float | None
    checkpoint_cost_source: str
    mtbf_s: float | None
    mtbf_source: str
    step_s: float | None
    restart_s: float | None
    method: str = "daly"
    reason: str | None = None  # why no interval could be computed
    warning: str | None = None  # an input to distrust (an MTBF from injected faults, an interval raised to the write)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()}


def advise(
    checkpoint_cost_s: float | None,
    mtbf_s: float | None,
    step_s: float | None,
    *,
    current_interval_steps: int | None = None,
    restart_s: float | None = None,
    checkpoint_cost_source: str = "given",
    mtbf_source: str = "given",
) -> Advice:
    """Daly's interval (and Young's for reference) in seconds and steps; ``reason`` says what is missing."""
    common = {
        "current_interval_steps": current_interval_steps,
        "checkpoint_cost_s": checkpoint_cost_s,
        "checkpoint_cost_source": checkpoint_cost_source,
        "mtbf_s": mtbf_s,
        "mtbf_source": mtbf_source,
        "step_s": step_s,
        "restart_s": restart_s,
    }
    missing = []
    if checkpoint_cost_s is None or checkpoint_cost_s <= 0:
        missing.append("a positive checkpoint cost (no checkpoint stall/write measured)")
    if mtbf_s is None or mtbf_s <= 0:
        missing.append("an MTBF (no failures in the run and observability.node_mtbf_hours unset)")
    if missing:
        none = dict.fromkeys(("interval_s", "interval_steps", "young_interval_s", "young_interval_steps"))
        return Advice(
            **none,
            expected_waste_current=None,
            expected_waste_suggested=None,
            reason="needs " + " and ".join(missing),
            **common,
        )
    assert checkpoint_cost_s is not None and mtbf_s is not None
    tau = daly_interval(checkpoint_cost_s, mtbf_s)
    young = young_interval(checkpoint_cost_s, mtbf_s)
    r = restart_s or 0.0
    steps = young_steps = waste_current = None
    if step_s is not None and step_s > 0:
        steps = max(1, round(tau / step_s))
        young_steps = max(1, round(young / step_s))
        if current_interval_steps:
            waste_current = expected_waste_fraction(current_interval_steps * step_s, checkpoint_cost_s, mtbf_s, r)
    return Advice(
        interval_s=tau,
        interval_steps=steps,
        young_interval_s=young,
        young_interval_steps=young_steps,
        expected_waste_current=waste_current,
        expected_waste_suggested=expected_waste_fraction(tau, checkpoint_cost_s, mtbf_s, r),
        **common,
    )


def advise_for_run(
    analysis: RunAnalysis,
    *,
    node_mtbf_hours: float | None = None,
    nodes: int | None = None,
    configured_interval_steps: int | None = None,
) -> Advice:
    """Pick the inputs from a run: δ = the mean stall, M from real faults or the node MTBF (module docstring), the
    step time without checkpoints; ``nodes`` is the run's node count when its events name no host."""
    ck = analysis.checkpoint_summary()
    cost = ck["stall_s_mean"]
    cost_src = f"stall_s_mean ({ck['mode'] or 'unknown'} checkpoints; the loop's wait per save, back-pressure included)"
    mtbf, mtbf_src, warning = _mtbf(analysis, node_mtbf_hours, nodes)
    step_s = analysis.step_s_without_ckpt
    if step_s is None and analysis.steps:
        step_s = statistics.median(s.duration_s for s in analysis.steps)
    committed = [s.step for s in analysis.committed]
    diffs = sorted(b - a for a, b in itertools.pairwise(committed) if b > a)
    current = round(statistics.median(diffs)) if diffs else configured_interval_steps
    recoveries = [f.recovery_s for f in analysis.faults if f.recovery_s is not None]
    restart = sum(recoveries) / len(recoveries) if recoveries else None
    advice = advise(
        cost,
        mtbf,
        step_s,
        current_interval_steps=current,
        restart_s=restart,
        checkpoint_cost_source=cost_src,
        mtbf_source=mtbf_src,
    )
    write = ck["write_s_mean"]
    if advice.interval_s is not None and ck["mode"] != "sync" and write is not None and advice.interval_s < write:
        note = f"interval raised from {advice.interval_s:.2f} s to the mean write time {write:.2f} s"
        # rounded first: a step time of 0.9999999 s (float noise) must not add a step
        steps = max(1, math.ceil(round(write / step_s, 6))) if step_s else None
        advice = replace(
            advice,
            interval_s=write,
            interval_steps=steps,
            expected_waste_suggested=expected_waste_fraction(write, cost, mtbf, restart or 0.0),  # type: ignore[arg-type]
        )
        warning = f"{warning}; {note}" if warning else note
    return replace(advice, warning=warning)


def _mtbf(analysis: RunAnalysis, node_mtbf_hours: float | None, nodes: int | None) -> tuple[float | None, str, Any]:
    """(M, where it came from, a warning)."""
    real = [f for f in analysis.faults if not f.injected]
    wall = analysis.wall_s
    n = len(analysis.hosts) or nodes or 1
    if len(real) >= MIN_REAL_FAULTS and wall > 0:
        return wall / len(real), f"measured: wall {wall:.1f} s / {len(real)} real fault(s)", None
    if node_mtbf_hours is not None:
        src = f"observability.node_mtbf_hours {node_mtbf_hours:g} h / {n} node(s)"
        return node_mtbf_hours * 3600.0 / n, src, None
    if analysis.faults and wall > 0:
        k = len(analysis.faults)
        warning = None
        if not real:
            warning = (
                f"MTBF from injected faults only ({k} in {wall:.1f} s): a test's fault rate, not the cluster's; "
                "set observability.node_mtbf_hours"
            )
        return wall / k, f"measured: wall {wall:.1f} s / {k} fault(s)", warning
    return None, "none: no faults and observability.node_mtbf_hours unset", None
