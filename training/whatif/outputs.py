"""What the planner writes: ``whatif.json`` (every figure and the resolved inputs), ``whatif.png``, a printed table,
and optionally the coalesced ``events.jsonl`` of one trial (the shape ``training.telemetry.goodput`` reads)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from training.whatif.engine import WATERFALL_KEYS, Summary, Trial

#: Colours of the waterfall components (productive first, then losses by kind).
COLOURS = {
    "productive": "#2e7d32",
    "stall": "#f9a825",
    "back_pressure": "#ef6c00",
    "rework": "#c62828",
    "restore": "#6a1b9a",
    "down_inprocess": "#1565c0",
    "down_ft_launcher": "#ff8f00",
    "down_job": "#4a148c",
    "down_resubmit": "#000000",
    "startup": "#757575",
}


def result_json(
    inputs: dict[str, Any],
    summary: Summary,
    optimum: dict[str, Any],
    *,
    sweep: list[dict[str, Any]] | None = None,
    best_interval_steps: int | None = None,
    modes: list[dict[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """The whole of ``whatif.json``."""
    body = summary.to_json()
    wall = sum(body["waterfall_s"].values())
    return {
        "inputs": inputs,
        "trials": len(summary.trials),
        **body,
        "waterfall_fraction": {k: (v / wall if wall > 0 else 0.0) for k, v in body["waterfall_s"].items()},
        **optimum,
        "best_interval_steps": best_interval_steps,
        "sweep": sweep or [],
        "modes": modes or [],
        "notes": notes or [],
    }


def write_json(result: dict[str, Any], path: str | os.PathLike[str]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(result, indent=2) + "\n")


def write_events(trial: Trial, path: str | os.PathLike[str]) -> None:
    """One JSON line per event of a trial run with ``record=True``."""
    assert trial.events is not None, "simulate(..., record=True) builds the events"
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in trial.events))


def format_table(r: dict[str, Any]) -> str:
    """The printed summary."""
    d = r["inputs"]["derived"]
    tg, ig, tt = r["training_goodput"], r["infrastructure_goodput"], r["time_to_target_s"]
    mtbf = d["cluster_mtbf_hours"]
    out = [
        f"What-if: {r['inputs']['nodes']} x {r['inputs']['gpus_per_node']} GPUs, mode {r['inputs']['mode']} "
        f"({d['checkpoint_mode']} checkpoints every {r['inputs']['interval']} steps), {r['trials']} trials",
        f"  job MTBF {'none' if mtbf is None else f'{mtbf:.2f} h'}, step {d['step_s']:.4g} s, "
        f"write {d['write_s']:.4g} s, stall {r['inputs']['stall_s']:.4g} s",
        "",
        f"  {'':<24}{'p5':>9}{'p50':>9}{'p95':>9}",
        f"  {'training goodput':<24}{_pct(tg['p5'])}{_pct(tg['p50'])}{_pct(tg['p95'])}",
        f"  {'infrastructure goodput':<24}{_pct(ig['p5'])}{_pct(ig['p50'])}{_pct(ig['p95'])}",
        f"  {'time to target (h)':<24}{tt['p5'] / 3600:9.3f}{tt['p50'] / 3600:9.3f}{tt['p95'] / 3600:9.3f}",
        f"  {'lost GPU-hours':<24}" + "".join(f"{r['lost_gpu_hours'][q]:9.1f}" for q in ("p5", "p50", "p95")),
        "",
        "  wall time (mean): " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in r["waterfall_fraction"].items() if v > 0),
        "",
        f"  interval: Young {r['young_interval_steps']}, Daly {r['daly_interval_steps']}, "
        + (f"best simulated {r['best_interval_steps']}" if r["best_interval_steps"] else "not swept")
        + f" (steps; >= {r['min_interval_steps']}: the write time)",
    ]
    if r["modes"]:
        out += ["", f"  {'mode':<14}{'goodput p50':>12}{'at Daly':>10}{'Daly steps':>12}"]
        out += [
            f"  {m['mode']:<14}{_pct(m.get('training_goodput_p50'), 12)}{_pct(m['training_goodput_p50_at_daly'], 10)}"
            f"{m['daly_interval_steps']:>12}"
            for m in r["modes"]
        ]
    out += [f"  note: {n}" for n in r["notes"]]
    return "\n".join(out)


def plot(r: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """``whatif.png``: goodput spread, wall-time waterfall, interval sweep with Young / Daly, modes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    ax = axes[0][0]
    names = ["training", "infrastructure"]
    for i, key in enumerate(("training_goodput", "infrastructure_goodput")):
        s = r[key]
        ax.errorbar(i, 100 * s["p50"], yerr=[[100 * (s["p50"] - s["p5"])], [100 * (s["p95"] - s["p50"])]], fmt="o",
                    capsize=8, color="black")  # fmt: skip
        ax.annotate(f"{100 * s['p50']:.1f}%", (i, 100 * s["p50"]), textcoords="offset points", xytext=(10, 0))
    ax.set_xticks([0, 1], names)
    ax.set_xlim(-0.5, 1.5)
    ax.set_ylabel("goodput, % (p50, bars p5-p95)")
    ax.set_title(f"Goodput over {r['trials']} trials")
    ax = axes[0][1]
    left = 0.0
    for k in WATERFALL_KEYS:
        v = r["waterfall_s"][k] / 3600
        if v > 0:
            ax.barh(0, v, left=left, color=COLOURS[k], label=f"{k} {100 * r['waterfall_fraction'][k]:.1f}%")
            left += v
    ax.set_yticks([])
    ax.set_xlabel("hours (mean of the trials)")
    ax.set_title("Where the wall time goes")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, fontsize=8)
    ax = axes[1][0]
    if r["sweep"]:
        xs = [p["interval_steps"] for p in r["sweep"]]
        ax.plot(xs, [100 * p["training_goodput_p50"] for p in r["sweep"]], "o-", color="black", label="p50")
        ax.plot(xs, [100 * p["training_goodput_mean"] for p in r["sweep"]], ":", color="tab:red", label="mean")
        lo = [100 * p["training_goodput_p5"] for p in r["sweep"]]
        hi = [100 * p["training_goodput_p95"] for p in r["sweep"]]
        ax.fill_between(xs, lo, hi, color="grey", alpha=0.3, label="p5-p95")
        for key, colour in (("young_interval_steps", "tab:blue"), ("daly_interval_steps", "tab:orange"),
                            ("best_interval_steps", "tab:green")):  # fmt: skip
            if r.get(key):
                ax.axvline(r[key], color=colour, linestyle="--", label=f"{key.split('_')[0]} {r[key]}")
        ax.set_xscale("log")
        ax.legend(fontsize=8)
    ax.set_xlabel("checkpoint interval, steps")
    ax.set_ylabel("training goodput, %")
    ax.set_title("Interval sweep")
    ax = axes[1][1]
    if r["modes"]:
        labels = [m["mode"] for m in r["modes"]]
        at_k = [100 * (m.get("training_goodput_p50") or 0.0) for m in r["modes"]]
        at_daly = [100 * m["training_goodput_p50_at_daly"] for m in r["modes"]]
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], at_k, width=0.4, label=f"every {r['inputs']['interval']} steps")
        ax.bar([x + 0.2 for x in xs], at_daly, width=0.4, label="at each mode's Daly interval")
        ax.set_xticks(list(xs), labels, rotation=20)
        ax.legend(fontsize=8)
    ax.set_ylabel("training goodput p50, %")
    ax.set_title("Recovery modes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _pct(x: float | None, width: int = 9) -> str:
    return f"{'n/a':>{width}}" if x is None else f"{100 * x:>{width - 1}.1f}%"
