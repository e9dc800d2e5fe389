"""Plots of the goodput report (matplotlib, Agg backend: no display needed).

* ``timeline.png``: optimizer step against wall time. Each step execution is a dot (grey when its work was later
  rolled back); per fault: an ``x`` at the fault, a ``|`` at detection, a shaded span from the fault to the
  first new step (recovery), an arrow from the fault step down to the restored step (rollback), all coloured by
  the layer that recovered; committed checkpoints are green triangles.
* ``recovery_hist.png``: recovery times, one stacked histogram series per layer.
* ``recovery_waterfall.png``: per fault, its recovery time as three consecutive bars: detection (fault ->
  detected), restart (-> the recovering workers started) and restore (-> the first new step).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from training.telemetry.analysis import UNKNOWN_LAYER, RunAnalysis

LAYER_COLOURS = {
    "inprocess": "tab:blue",
    "ft_launcher": "tab:orange",
    "job": "tab:purple",
    UNKNOWN_LAYER: "tab:red",
}


def layer_colour(layer: str | None) -> str:
    return LAYER_COLOURS.get(layer or UNKNOWN_LAYER, LAYER_COLOURS[UNKNOWN_LAYER])


def plot_timeline(a: RunAnalysis, path: str | Path) -> dict[str, list[tuple[float, ...]]]:
    """Write the timeline; returns what it drew, in seconds since the first event: ``kept`` and ``rolled_back``
    (time, step) points, ``commits`` (time, step), and per fault ``faults`` (fault, detection, recovered, from step,
    to step), a missing time as NaN."""
    fig, ax = plt.subplots(figsize=(11, 5.5), dpi=110)
    t0 = a.t0 or 0.0
    kept_ids = {id(s) for s in a.kept.values()}
    kept = [s for s in a.steps if id(s) in kept_ids]
    lost = [s for s in a.steps if id(s) not in kept_ids]
    if kept:
        ax.plot([s.ts - t0 for s in kept], [s.step for s in kept], ".", ms=3, color="black", label="step (kept)")
    if lost:
        ax.plot([s.ts - t0 for s in lost], [s.step for s in lost], ".", ms=3, color="0.65", label="step (rolled back)")
    commits = a.committed
    if commits:
        ax.plot(
            [c.committed_ts - t0 for c in commits],  # type: ignore[operator]
            [c.step for c in commits],
            "^",
            color="tab:green",
            ms=6,
            label="checkpoint committed",
        )
    seen_layers: set[str] = set()
    nan = float("nan")
    drawn: dict[str, list[tuple[float, ...]]] = {
        "kept": [(round(s.ts - t0, 4), s.step) for s in kept],
        "rolled_back": [(round(s.ts - t0, 4), s.step) for s in lost],
        "commits": [(round(c.committed_ts - t0, 4), c.step) for c in commits],  # type: ignore[operator]
        "faults": [],
    }
    for f in a.faults:
        colour = layer_colour(f.layer)
        layer = f.layer or UNKNOWN_LAYER
        y = f.step if f.step is not None else (a.final_step or 0)
        label = None if layer in seen_layers else f"fault recovered by {layer}"
        seen_layers.add(layer)
        ax.plot([f.ts - t0], [y], "x", color=colour, ms=9, mew=2, label=label)
        times = [f.ts, f.detection_ts, f.recovered_ts]
        arrow = (f.step, f.restored_step) if f.rollback_steps and f.restored_step is not None else (y, y)
        drawn["faults"].append((*(nan if t is None else round(t - t0, 4) for t in times), *arrow))
        if f.detection_ts is not None:
            ax.plot([f.detection_ts - t0], [y], "|", color=colour, ms=14, mew=2)
        if f.recovered_ts is not None:
            ax.axvspan(f.ts - t0, f.recovered_ts - t0, color=colour, alpha=0.15)
        if f.restored_step is not None and f.step is not None and f.rollback_steps:
            x = (f.restore_ts if f.restore_ts is not None else f.ts) - t0
            ax.annotate(
                "",
                xy=(x, f.restored_step),
                xytext=(x, f.step),
                arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.5},
            )
    # Legend proxies for the per-fault marks that carry no label of their own.
    if any(f.detection_ts is not None for f in a.faults):
        ax.plot([], [], "|", color="0.3", ms=10, mew=2, label="detection")
    if any(f.recovered_ts is not None for f in a.faults):
        ax.fill_between([], [], color="0.3", alpha=0.15, label="fault -> first new step (recovery)")
    if any(f.rollback_steps for f in a.faults):
        ax.plot([], [], color="0.3", label="rollback (fault step -> restored step)")
    ax.set_xlabel("wall time since the first event [s]")
    ax.set_ylabel("optimizer step")
    tg, ig = a.training_goodput, a.infrastructure_goodput
    ax.set_title(
        f"training goodput {_pct(tg)}, infrastructure goodput {_pct(ig)}, {len(a.faults)} fault(s), "
        f"final step {a.final_step}"
    )
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return drawn


def plot_recovery_hist(a: RunAnalysis, path: str | Path) -> dict[str, int]:
    """Write the recovery-time histogram; returns the number of recoveries drawn per layer."""
    groups = a.values_by_layer("recovery_s")
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    if groups:
        layers = sorted(groups)
        ax.hist(
            [groups[k] for k in layers],
            bins=min(20, max(5, sum(len(v) for v in groups.values()))),
            stacked=True,
            color=[layer_colour(k) for k in layers],
            label=[f"{k} (n={len(groups[k])})" for k in layers],
        )
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no recovered faults in this run", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("recovery time: fault -> first new step after restore [s]")
    ax.set_ylabel("faults")
    ax.set_title("recovery-time distribution by layer")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return {k: len(v) for k, v in groups.items()}


#: The parts of one recovery, in order, with their colours.
WATERFALL_PARTS = (("detection", "tab:red"), ("restart", "tab:orange"), ("restore", "tab:blue"))


def plot_recovery_waterfall(a: RunAnalysis, path: str | Path) -> list[list[tuple[float, float]]]:
    """Write the waterfall; returns, per recovered fault, the (start, length) of its detection, restart and restore
    bars in seconds after the fault (the parts a missing time leaves out are absent)."""
    faults = [f for f in a.faults if f.recovered_ts is not None]
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.5 * max(1, len(faults))), dpi=110)
    drawn: list[list[tuple[float, float]]] = []
    for row, f in enumerate(faults):
        parts = [f.detection_s, f.restart_s, f.restore_s]
        if None in parts:  # only the whole recovery is known
            parts = [None, None, None]
        bars: list[tuple[float, float]] = []
        x = 0.0
        for (name, colour), length in zip(WATERFALL_PARTS, parts, strict=True):
            if length is None:
                continue
            ax.barh(row, length, left=x, color=colour, label=name if row == 0 else None)
            bars.append((round(x, 4), round(length, 4)))
            x += length
        if not bars:
            ax.barh(row, f.recovery_s, color="0.6", label="recovery (parts unknown)")
            bars.append((0.0, round(f.recovery_s or 0.0, 4)))
        ax.text(f.recovery_s or 0.0, row, f" {f.recovery_s:.2f} s", va="center", fontsize=8)
        drawn.append(bars)
    ax.set_yticks(range(len(faults)), [f"{f.kind} @ {f.step} ({f.layer or UNKNOWN_LAYER})" for f in faults])
    ax.invert_yaxis()
    ax.set_xlabel("seconds after the fault: detection -> restart -> restore (= recovery: the first new step)")
    ax.set_title("recovery of each fault")
    if faults:
        ax.legend(fontsize=8, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no recovered faults in this run", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return drawn


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"
