"""Goodput report of a run: ``python -m training.telemetry.report RUN_DIR [--config PATH] [--env ENV]``.

Reads ``RUN_DIR/events.jsonl`` (all ranks, all restarts) and writes ``RUN_DIR/report.json``,
``RUN_DIR/timeline.png`` and ``RUN_DIR/recovery_hist.png``, then prints a table. Definitions: ``docs/goodput.md``.
The goodput planner (``training.whatif``) adds a recovery mode and interval for the ``--plan-env`` cluster.
Exit status: 0 with a report (warnings are printed); 2 before anything is read when there is no event log or a
configuration or environment named on the command line does not load (one message naming each).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from platform_config import ConfigError, ProjectConfig, load_config
from training.common.arguments import nested, parse, problem
from training.telemetry.analysis import RunAnalysis
from training.telemetry.events import EVENTS_FILE
from training.telemetry.exits import read_worker_exits
from training.telemetry.goodput import analyze, load_events
from training.telemetry.interval_advisor import advise_for_run
from training.telemetry.node_phases import node_losses, phase_lines
from training.whatif.sweep import for_report

REPORT_FILE = "report.json"
TIMELINE_FILE = "timeline.png"
RECOVERY_HIST_FILE = "recovery_hist.png"
WATERFALL_FILE = "recovery_waterfall.png"
#: Resolved configurations a run may carry; the first that exists wins over --config.
RUN_CONFIG_FILES = ("config.json", "resolved_config.json")
#: The environment whose cluster the planner sizes its recommendation for.
PLAN_ENV = "prod"


def build_report(run_dir: Path, cfg: ProjectConfig | None = None) -> tuple[dict[str, Any], RunAnalysis]:
    """The report dict and the analysis behind it (raises FileNotFoundError without an event log)."""
    loaded = load_events(run_dir)
    a = analyze(loaded.events, read_worker_exits(run_dir))
    if loaded.torn_lines:
        a.warnings.append(f"{loaded.torn_lines} torn (non-JSON) line(s) skipped")
    if loaded.malformed:
        a.warnings.append(f"{loaded.malformed} line(s) without a numeric ts or an event name skipped")
    advice = advise_for_run(
        a,
        node_mtbf_hours=cfg.observability.node_mtbf_hours if cfg else None,
        nodes=cfg.gpu_nodes.node_count if cfg else None,
        configured_interval_steps=cfg.checkpoint.interval_steps if cfg else None,
    )
    if advice.warning:
        a.warnings.append(f"checkpoint interval advice: {advice.warning}")
    report = {"run_dir": str(run_dir), **a.to_json(), "advice": advice.to_json()}
    report["events"].update({"torn_lines": loaded.torn_lines, "malformed_lines": loaded.malformed})
    report["node_losses"] = node_losses(run_dir)  # the local cluster's EKS timeline (job.json), if any
    return report, a


def plan(report: dict[str, Any], config: str | None, env: str) -> dict[str, Any]:
    """The planner's mode and interval for ``env``'s cluster with this run's times; ``reason`` when it cannot."""
    try:
        return {"env": env, **for_report(report, load_config(config, env=env))}
    except (ConfigError, ValueError) as exc:
        return {"env": env, "reason": str(exc)}


def format_table(r: dict[str, Any]) -> str:
    """The printed report."""
    out = [f"Goodput report: {r['run_dir']}", ""]
    st = r["steps"]
    rows = [
        ("wall time", _s(r["wall_seconds"])),
        ("final step", str(r["final_step"])),
        ("training goodput", f"{_pct(r['training_goodput'])}  (kept steps' compute {_s(r['productive_seconds'])})"),
        (
            "infrastructure goodput",
            f"{_pct(r['infrastructure_goodput'])}  (workers in the training loop {_s(r['working_seconds'])})",
        ),
        ("steps", f"executed {st['executed']}, kept {st['kept']}, discarded {st['discarded']}"),
    ]
    out += [f"  {k:<24}{v}" for k, v in rows]
    out += ["", "Faults"]
    if r["faults"]:
        out += _grid(
            [
                "#",
                "kind",
                "step",
                "rank",
                "layer",
                "detect s",
                "restart s",
                "restore s",
                "recover s",
                "rollback",
                "rollback s",
                "lost s",
            ],
            [
                [
                    str(i + 1),
                    f["kind"],
                    _v(f["step"]),
                    _v(f["rank"]),
                    _v(f["layer"]),
                    _n(f["detection_s"]),
                    _n(f["restart_s"]),
                    _n(f["restore_s"]),
                    _n(f["recovery_s"]),
                    _v(f["rollback_steps"]),
                    _n(f["rollback_s"]),
                    _n(f["lost_work_s"]),
                ]
                for i, f in enumerate(r["faults"])
            ],
        )
    else:
        out.append("  none")
    out += phase_lines(r.get("node_losses") or [])
    out += ["", "Recovery time by layer (fault -> first new step after the restore)"]
    if r["recovery_s_by_layer"]:
        out += _grid(
            ["layer", "n", "p50 s", "p95 s", "max s"],
            [[k, str(v["n"]), _n(v["p50"]), _n(v["p95"]), _n(v["max"])] for k, v in r["recovery_s_by_layer"].items()],
        )
    else:
        out.append("  no recovered faults")
    rs = r["restarts"]
    causes = ", ".join(f"{k} {v}" for k, v in rs["by_layer_and_cause"].items()) or "none"
    out += ["", f"Restarts: {rs['total']}  ({causes}); a fault that restarted two layers is one recovery above"]
    ck = r["checkpoint"]
    out += [
        "",
        "Checkpoints",
        f"  {'saves':<24}{ck['saves']} committed, {ck['failed']} failed, {ck['quarantined']} quarantined"
        f" (mode {ck['mode'] or 'n/a'})",
        f"  {'stall per save':<24}mean {_s(ck['stall_s_mean'])}, p50 {_s(ck['stall_s_p50'])}, "
        f"p95 {_s(ck['stall_s_p95'])}; back-pressure {_s(ck['backpressure_s'])} in all",
        f"  {'write duration':<24}mean {_s(ck['write_s_mean'])}, p50 {_s(ck['write_s_p50'])}, "
        f"p95 {_s(ck['write_s_p95'])}; interval {_s(ck['interval_s'])}",
        f"  {'efficiency':<24}{_pct(ck['efficiency'])}  (steps/s with / without checkpoints: "
        f"{_n(ck['steps_per_s_with_checkpoints'])} / {_n(ck['steps_per_s_without_checkpoints'])})",
        f"  {'memory snapshots':<24}{ck['memory_snapshots']}, stall p50 {_s(ck['memory_stall_s_p50'])}, "
        f"{_s(ck['memory_stall_s_total'])} in all; interval {ck['memory_interval_steps'] or 'fixed'}; loop time in "
        f"saves and snapshots {_pct(ck['overhead_fraction_of_wall'])} of the wall time",
        f"  {'freshness':<24}max age {_s(r['freshness']['max_s'])}, mean age {_s(r['freshness']['mean_s'])}",
    ]
    ad = r["advice"]
    out += ["", "Checkpoint interval advice (Daly)"]
    if ad["interval_s"] is None:
        out.append(f"  not computed: {ad['reason']}")
    else:
        out += [
            f"  suggested every {_s(ad['interval_s'])} = {_v(ad['interval_steps'])} steps "
            f"(Young: {_s(ad['young_interval_s'])}); now every {_v(ad['current_interval_steps'])} steps",
            f"  inputs: cost {_s(ad['checkpoint_cost_s'])} [{ad['checkpoint_cost_source']}], "
            f"MTBF {_s(ad['mtbf_s'])} [{ad['mtbf_source']}], step {_s(ad['step_s'])}",
        ]
        if ad["expected_waste_current"] is not None:
            out.append(
                f"  expected waste (first order): now {_pct(ad['expected_waste_current'])}, "
                f"suggested {_pct(ad['expected_waste_suggested'])}"
            )
    if "whatif" in r:
        out += ["", *_plan_lines(r["whatif"])]
    if r["warnings"]:
        out += ["", "Warnings"] + [f"  - {w}" for w in r["warnings"]]
    return "\n".join(out)


def problems(args: argparse.Namespace) -> list[str]:
    """What makes the command unusable before it reads anything: no event log in ``run_dir``, a ``--config`` /
    ``--env`` given that does not load, a ``--plan-env`` given that is not an environment of the configuration (the
    default one missing is said in the report: the planner's ``reason``)."""
    lines = []
    if not (args.run_dir / EVENTS_FILE).is_file():
        allowed = f"a run directory holding {EVENTS_FILE} (training writes it as it starts: did the run start?)"
        lines.append(problem("RUN_DIR", allowed, str(args.run_dir)))
    envs = [("--config / --env", args.env)] if args.config or args.env else []
    for flag, env in envs + ([("--plan-env", args.plan_env)] if args.plan_env and not args.no_plan else []):
        try:
            load_config(args.config, env=env)
        except ConfigError as exc:
            if not any(line.endswith(f": {nested(str(exc))}") for line in lines):  # one missing file: said once
                lines.append(f"{flag}: {nested(str(exc))}")
    return lines


def _load_cfg(run_dir: Path, path: str | None, env: str | None) -> tuple[ProjectConfig | None, str | None]:
    candidates = [run_dir / n for n in RUN_CONFIG_FILES if (run_dir / n).is_file()] if path is None else []
    try:
        return load_config(candidates[0] if candidates else path, env=env), None
    except ConfigError as exc:
        return None, f"configuration not loaded ({exc}); advice uses the run's measurements only"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.telemetry.report", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path, help="the run directory holding events.jsonl")
    p.add_argument("--config", help="project.yaml (default: the run's config.json if present, else project.yaml)")
    p.add_argument("--env", help="environment of the configuration (default: $PROJECT_ENV or default)")
    p.add_argument("--no-plots", action="store_true", help="skip timeline.png and recovery_hist.png")
    p.add_argument("--plan-env", default=None, help=f"cluster the planner sizes for (default {PLAN_ENV})")
    p.add_argument("--no-plan", action="store_true", help="skip the planner's recommendation")
    args = parse(p, argv, problems)
    cfg, cfg_warning = _load_cfg(args.run_dir, args.config, args.env)
    report, analysis = build_report(args.run_dir, cfg)
    if cfg_warning:
        report["warnings"].append(cfg_warning)
    if not args.no_plan:
        report["whatif"] = plan(report, args.config, args.plan_env or PLAN_ENV)
    if not args.no_plots:
        from training.telemetry.plots import plot_recovery_hist, plot_recovery_waterfall, plot_timeline

        plot_timeline(analysis, args.run_dir / TIMELINE_FILE)
        plot_recovery_hist(analysis, args.run_dir / RECOVERY_HIST_FILE)
        plot_recovery_waterfall(analysis, args.run_dir / WATERFALL_FILE)
        report["plots"] = [TIMELINE_FILE, RECOVERY_HIST_FILE, WATERFALL_FILE]
    (args.run_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    print(format_table(report))
    print(
        f"\nwrote {args.run_dir / REPORT_FILE}"
        + ("" if args.no_plots else f", {TIMELINE_FILE}, {RECOVERY_HIST_FILE}, {WATERFALL_FILE}")
    )
    return 0


def _plan_lines(w: dict[str, Any]) -> list[str]:
    head = f"Planner (python -m training.whatif) for environment {w['env']}"
    if "reason" in w:
        return [head, f"  not computed: {w['reason']}"]
    modes = ", ".join(f"{m} {_pct(v['training_goodput_p50'])} @ {v['interval_steps']}" for m, v in w["by_mode"].items())
    return [
        f"{head}: {w['nodes']} x {w['gpus_per_node']} GPUs, {w['steps']} steps, this run's step, checkpoint and "
        "restart times",
        f"  recommended: {w['mode']}, a checkpoint every {w['interval_steps']} steps (configured "
        f"{w['configured_interval_steps']}): training goodput p50 {_pct(w['training_goodput_p50'])}, "
        f"infrastructure {_pct(w['infrastructure_goodput_p50'])}",
        f"  by mode: {modes}",
        f"  node MTBF {w['node_mtbf_hours']:.0f} h [{w['node_mtbf_source']}]; {w['trials']} trials per point",
    ]


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  " + "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header)] + [fmt.format(*r) for r in rows]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f} s"


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _v(x: Any) -> str:
    return "-" if x is None else str(x)


if __name__ == "__main__":
    sys.exit(main())
