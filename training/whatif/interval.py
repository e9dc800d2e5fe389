"""Closed-form optimum checkpoint interval (Young 1974, Daly 2006) and its expression in steps.

With checkpoint cost ``δ`` (seconds the training loop loses per checkpoint) and mean time between failures ``M``:

* Young: ``τ = sqrt(2·δ·M)``
* Daly (higher order): ``τ = sqrt(2·δ·M)·[1 + (1/3)·sqrt(δ/(2M)) + (1/9)·(δ/(2M))] - δ`` for ``δ < 2M``, else ``τ = M``

``τ`` is compute time between checkpoints. In steps, an interval is kept within ``[min_interval_steps, steps]``:
with asynchronous checkpoints the compute between two saves must cover the background write (else the next save
waits for it: back-pressure), so the smallest useful interval is ``ceil(write_s / step_s)``. A synchronous write
is part of the stall, which ``δ`` already counts, so it sets no lower bound.
"""

from __future__ import annotations

import math

from training.whatif.params import Scenario


def young_interval(delta_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum ``sqrt(2·δ·M)``."""
    require_positive(delta_s, mtbf_s)
    return math.sqrt(2.0 * delta_s * mtbf_s)


def daly_interval(delta_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum; ``M`` itself when ``δ >= 2M``."""
    require_positive(delta_s, mtbf_s)
    if delta_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = delta_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * delta_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta_s


def require_positive(delta_s: float, mtbf_s: float) -> None:
    """Raise ValueError unless both the checkpoint cost and the MTBF are positive."""
    if delta_s <= 0 or mtbf_s <= 0:
        raise ValueError(f"checkpoint cost and MTBF must be positive, got δ={delta_s} M={mtbf_s}")


def checkpoint_cost_s(sc: Scenario) -> float:
    """``δ``: the stall per save (async), or the stall plus the write (sync)."""
    return sc.stall_s + (sc.write_time if sc.ckpt_mode == "sync" else 0.0)


def min_interval_steps(sc: Scenario) -> int:
    """The smallest interval without back-pressure: compute between saves >= the write (async); else 1."""
    if sc.ckpt_mode == "sync":
        return 1
    return min(max(1, math.ceil(sc.write_time / sc.step_time - 1e-9)), sc.steps)


def interval_steps(tau_s: float, sc: Scenario) -> int:
    """``τ`` in steps, within ``[min_interval_steps, steps]`` (an infinite ``τ`` is one save at the end)."""
    lo = min_interval_steps(sc)
    if not math.isfinite(tau_s):
        return sc.steps
    return min(max(lo, round(tau_s / sc.step_time)), sc.steps)


def optimum(sc: Scenario) -> dict[str, float | int | None]:
    """Young's and Daly's interval for ``sc`` (seconds and steps) and their inputs.

    Without random faults ``M`` is infinite and so is ``τ``: one save at the end. With free checkpoints (``δ`` = 0)
    ``τ`` is 0: the smallest interval.
    """
    delta, mtbf = checkpoint_cost_s(sc), sc.cluster_mtbf_s
    if not math.isfinite(mtbf):
        young = daly = math.inf
    elif delta <= 0:
        young = daly = 0.0
    else:
        young, daly = young_interval(delta, mtbf), daly_interval(delta, mtbf)
    return {
        "checkpoint_cost_s": delta,
        "cluster_mtbf_s": mtbf if math.isfinite(mtbf) else None,
        "young_interval_s": young if math.isfinite(young) else None,
        "daly_interval_s": daly if math.isfinite(daly) else None,
        "young_interval_steps": interval_steps(young, sc),
        "daly_interval_steps": interval_steps(daly, sc),
        "min_interval_steps": min_interval_steps(sc),
    }
