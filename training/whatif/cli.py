"""``python -m training.whatif``: predict goodput for a cluster size, failure rate, recovery mode and checkpoint
interval; sweep the interval (Young / Daly marked) and compare the recovery modes.

Inputs, later ones winning: the defaults (documented in :mod:`training.whatif.params`), ``--config``/``--env``
(``project.yaml``), ``--from-report`` (a run's ``report.json``), ``--scenario FILE.yaml``, then the flags below.
Writes ``--json`` (default ``whatif.json``) and the plot next to it (``whatif.png``), prints a table.
Exit status: 0, or 2 with one message naming every input that is not usable (the flag, or the scenario file).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from platform_config import ConfigError, RecoveryMode, load_config
from training.common.arguments import USAGE_ERROR, choices, message, number, parse
from training.whatif import calibrate, inputs, outputs
from training.whatif.engine import GIVE_UP_FACTOR, run_trials, simulate
from training.whatif.interval import optimum
from training.whatif.params import CHECKPOINT_MODES, LAYERS, Scenario, ScenarioError
from training.whatif.sweep import DEFAULT_POINTS, best_interval, compare_modes, interval_grid, sweep

#: Scenario fields set by a plain flag of the same name (``--step-s`` -> ``step_s``) and their types.
SIMPLE_FLAGS: dict[str, type] = {
    "steps": int,
    "step_s": float,
    "interval": int,
    "stall_s": float,
    "first_stall_s": float,
    "write_s": float,
    "checkpoint_gb": float,
    "model_params_b": float,
    "bytes_per_param": float,
    "fsx_capacity_gib": int,
    "fsx_mbps_per_tib": float,
    "node_mbps": float,
    "verify_s": float,
    "reinit_s": float,
    "memory_interval": int,
    "memory_stall_s": float,
    "memory_restore_s": float,
    "startup_s": float,
    "startup_per_node_s": float,
    "nodes": int,
    "gpus_per_node": int,
    "node_mtbf_hours": float,
    "spares": int,
    "node_replace_s": float,
    "resubmit_s": float,
    "trials": int,
    "seed": int,
}
_DOC = {f.name: f for f in fields(Scenario)}
#: A scenario that validates (the documented defaults, a step time): a refused field takes its value, to find the next.
USABLE = Scenario(step_s=1.0).validate()
#: Scenario fields whose flag is not their own name.
FIELD_FLAGS = {"fault_schedule": "--faults", "layers": "--restart-s / --budget"}


def flag(name: str) -> str:
    """The flag that sets Scenario field ``name``."""
    return FIELD_FLAGS.get(name, "--" + name.replace("_", "-"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m training.whatif",
        description=__doc__.split("\n\n")[0],
    )
    src = p.add_argument_group("where the inputs come from")
    src.add_argument("--config", help="project.yaml to take the cluster from (nodes, GPUs, mode, steps, interval)")
    src.add_argument("--env", help="environment of --config (e.g. prod)")
    src.add_argument("--from-report", metavar="PATH", help="a run's report.json: step, checkpoint and restart times")
    src.add_argument(
        "--report-faults", action="store_true", help="with --from-report: also the run's fault mix and rate"
    )
    src.add_argument("--report-nodes", type=number(int, at_least=1), default=1, help="nodes of the --from-report run")
    src.add_argument(
        "--scenario", metavar="FILE", help="a YAML file of scenario fields (see training/whatif/inputs.py)"
    )
    run = p.add_argument_group("the scenario (unset = as above, else the documented default)")
    for name, kind in SIMPLE_FLAGS.items():
        default = _DOC[name].default
        run.add_argument(flag(name), type=number(kind), default=None, metavar=name.split("_")[-1].upper(),
                         help=f"default {default}" if default is not None else "default: unset")  # fmt: skip
    run.add_argument(
        "--step-s-by-nodes", metavar="N:S,...", help="measured step times by node count, e.g. 2:0.45,8:0.5"
    )
    peer_help = "memory-tier snapshots also held on another node: a lost node restores from them"
    run.add_argument("--memory-peer-copies", action="store_true", default=None, help=peer_help)
    run.add_argument("--checkpoint-mode", **choices(CHECKPOINT_MODES), help="default: the recovery mode's")
    modes = [m.value for m in RecoveryMode]
    run.add_argument("--mode", **choices(modes), help="recovery mode (which layers are on)")
    run.add_argument("--restore-s", metavar="P50[,P95]", help="read + verify + re-initialise, seconds")
    run.add_argument("--restart-s", action="append", default=[], metavar="LAYER=P50[,P95]",
                     help=f"a layer's detection -> back in the loop; LAYER in {', '.join(LAYERS)}")  # fmt: skip
    run.add_argument("--budget", action="append", default=[], metavar="LAYER=N", help="a layer's restart budget")
    run.add_argument("--faults", metavar="CLASS@STEP,...", help="a fixed fault schedule, e.g. exception@62,hang@574")
    out = p.add_argument_group("outputs")
    out.add_argument(
        "--json", default="whatif.json", help="the results; the plot goes next to it (default whatif.json)"
    )
    out.add_argument("--no-plot", action="store_true", help="skip the .png")
    out.add_argument("--events", metavar="PATH", help="write trial 0's coalesced events.jsonl (small runs only)")
    out.add_argument("--sweep-points", type=number(int, at_least=0), default=DEFAULT_POINTS,
                     help=f"interval sweep points, 0 = no sweep (default {DEFAULT_POINTS})")  # fmt: skip
    out.add_argument("--sweep-trials", type=number(int, at_least=1),
                     help="trials per sweep point and per mode (default: --trials)")  # fmt: skip
    out.add_argument("--no-modes", action="store_true", help="skip the comparison of recovery modes")
    return p


class InvalidInputs(ScenarioError):
    """Every input that is not usable, a line each (naming the flag or the scenario file that set it)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def scenario_from_args(args: argparse.Namespace) -> tuple[Scenario, list[str]]:
    """Resolve the scenario in precedence order; raises :class:`InvalidInputs` naming every input that is not usable
    (the flag, or the scenario file, that set it)."""
    bad: list[str] = []

    def attempt(convert: Any, *given: Any) -> Any:
        try:
            return convert(*given)
        except (ScenarioError, ConfigError, ValueError) as exc:
            bad.append(str(exc))
            return None

    notes: list[str] = []
    cfg = attempt(load_config, args.config, args.env) if args.config or args.env else None
    sc = inputs.from_config(cfg) if cfg is not None else Scenario()
    if args.from_report:
        cal = attempt(lambda: calibrate.calibrate(calibrate.load_report(args.from_report), sc))
        if cal is not None:
            sc = cal.apply(sc, faults=args.report_faults, report_nodes=args.report_nodes)
            notes += [f"from report: {n}" for n in cal.notes]
    from_file: set[str] = set()
    if args.scenario:
        mapping = attempt(inputs.load_mapping, args.scenario)
        with_file = attempt(inputs.apply_mapping, sc, mapping, f"--scenario {args.scenario}") if mapping else None
        sc, from_file = (with_file, set(mapping)) if with_file is not None else (sc, set())
    changes: dict[str, Any] = {k: getattr(args, k) for k in SIMPLE_FLAGS if getattr(args, k) is not None}
    if changes.get("step_s") is not None:
        changes["step_s_by_nodes"] = None
    if args.step_s_by_nodes:
        changes["step_s_by_nodes"] = attempt(inputs.parse_by_nodes, args.step_s_by_nodes)
    if args.memory_peer_copies:
        changes["memory_peer_copies"] = True
    if args.checkpoint_mode:
        changes["checkpoint_mode"] = args.checkpoint_mode
    if args.mode:
        changes["mode"] = args.mode
    if args.restore_s:
        changes["restore_s"] = attempt(inputs.parse_dist, args.restore_s, "--restore-s")
    if args.faults:
        changes["fault_schedule"] = attempt(inputs.parse_schedule, args.faults) or ()
    layers = dict(sc.layers)
    for layer, text in (attempt(inputs.parse_layer_values, args.restart_s, "--restart-s") or {}).items():
        dist = attempt(inputs.parse_dist, text, f"--restart-s {layer}")
        layers[layer] = replace(layers[layer], restart=dist) if dist is not None else layers[layer]
    for layer, text in (attempt(inputs.parse_layer_values, args.budget, "--budget") or {}).items():
        if not text.isdigit():
            bad.append(f"--budget {layer}: expected a whole number of restarts (got {text!r})")
        else:
            layers[layer] = replace(layers[layer], budget=int(text))

    def where(name: str) -> str:
        return f"--scenario {args.scenario}: {name}" if name in from_file and name not in changes else flag(name)

    sc = replace(sc, **changes, layers=layers)
    bad += validation_problems(sc, where)
    if bad:
        raise InvalidInputs(bad)
    return sc, notes


def validation_problems(sc: Scenario, where: Any) -> list[str]:
    """Every field of ``sc`` that :meth:`Scenario.validate` refuses (it names the first: each refused field is set to
    :data:`USABLE`'s value in turn, until the scenario validates); ``where(field)`` names the input that set it."""
    lines: list[str] = []
    for _ in range(len(_DOC) + 1):
        try:
            sc.validate()
            return lines
        except ScenarioError as exc:
            name, sep, rest = str(exc).partition(":")
            lines.append(f"{where(name)}{sep}{rest}" if name in _DOC else str(exc))
            if name not in _DOC or getattr(sc, name) == getattr(USABLE, name):  # no field to set: the rest stay unseen
                return lines
            sc = replace(sc, **{name: getattr(USABLE, name)})
    return lines


def run(sc: Scenario, *, sweep_points: int, sweep_trials: int | None, modes: bool, notes: list[str]) -> dict[str, Any]:
    """Every figure of ``whatif.json`` for ``sc``."""
    summary = run_trials(sc)
    if summary.unfinished:
        notes = [*notes, f"{summary.unfinished} of {sc.trials} trials gave up at {GIVE_UP_FACTOR:g} x the compute time "
                 "(goodput below 5%): their figures are those so far"]  # fmt: skip
    opt = optimum(sc)
    rows, best = None, None
    if sweep_points > 0:
        rows = sweep(sc, interval_grid(sc, sweep_points), sweep_trials)
        best = best_interval(rows)
    mode_rows = compare_modes(sc, sweep_trials) if modes else None
    return outputs.result_json(
        sc.to_json(), summary, opt, sweep=rows, best_interval_steps=best, modes=mode_rows, notes=notes
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)  # a value of the wrong type or range: status 2, every such value named
    try:
        sc, notes = scenario_from_args(args)
        if args.events:
            outputs.write_events(simulate(sc, 0, record=True), args.events)
    except InvalidInputs as exc:
        print(message(parser.prog, exc.lines), end="", file=sys.stderr)
        return USAGE_ERROR
    except (ScenarioError, ConfigError, ValueError) as exc:
        print(message(parser.prog, [str(exc)]), end="", file=sys.stderr)
        return USAGE_ERROR
    result = run(sc, sweep_points=args.sweep_points, sweep_trials=args.sweep_trials, modes=not args.no_modes,
                 notes=notes)  # fmt: skip
    out = Path(args.json)
    outputs.write_json(result, out)
    written = [str(out)]
    if not args.no_plot:
        outputs.plot(result, out.with_suffix(".png"))
        written.append(str(out.with_suffix(".png")))
    if args.events:
        written.append(args.events)
    print(outputs.format_table(result))
    print(f"\nwrote {', '.join(written)}")
    return 0
