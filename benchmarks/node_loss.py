"""Node-loss benchmark: the training Job's manifests on a local cluster, one node lost at each index, per mode.

``python -m benchmarks.node_loss [--modes inprocess-ft,inprocess,ft-launcher,sync-ckpt,async-ckpt,k8s-only]
[--nodes 2] [--nproc 1] [--steps 80] [--at 40] [--node-replace-s 5] [--out runs/bench-node-loss]``

Each run is ``python -m training.local --nodes N`` (training/cluster/: pods as network namespaces, the Job
controller's semantics, the synthesized manifests) with one ``node-loss@AT:INDEX`` fault: the pod at INDEX and
everything in it is killed, and a replacement pod may start ``--node-replace-s`` later (a spare node joining).
A fault-free run of the same length is the reference: every faulted run must end with its final state sha256.

Printed per run: the layer that recovered, detection (fault -> first survivor's exit or restart), recovery
(fault -> first new optimizer step after the restore; docs/goodput.md), the step restored and the rollback.
This is CPU only (gloo, tiny model): the table says so. The time is dominated by worker start-up and the
replacement delay, not by the model.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.common import fmt, report, run_local
from training.common.arguments import good, listed, number, one_of, parse, problem

MODES = "inprocess-ft,inprocess,ft-launcher,sync-ckpt,async-ckpt,k8s-only"


def _sha(run_dir: Path) -> str | None:
    summary = run_dir / "summary.json"
    return json.loads(summary.read_text()).get("final_state_sha256") if summary.is_file() else None


def _row(mode: str, index: int, run_dir: Path, rc: int, reference: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {"mode": mode, "lost_index": index, "exit": rc, "same_state": None}
    if rc:
        return row
    r = report(run_dir)
    fault = next((f for f in r["faults"] if f["kind"] == "node-loss"), None)
    if fault:
        row.update(
            {
                k: fault.get(k)
                for k in ("layer", "detection_s", "recovery_s", "restored_step", "rollback_steps", "layers_tried")
            }
        )
    row["same_state"] = _sha(run_dir) == reference
    row["infrastructure_goodput"] = r["infrastructure_goodput"]
    return row


def problems(args: argparse.Namespace) -> list[str]:
    """A node lost after the run's last step, or a pod index outside the Job."""
    lines = []
    if good(args.at) and good(args.steps) and args.at > args.steps:
        lines.append(problem("--at", f"at most --steps {args.steps}: a step of the run", args.at))
    if good(args.indexes) and good(args.nodes) and max(args.indexes) >= args.nodes:
        lines.append(problem("--indexes", f"pod indexes below --nodes {args.nodes}", ",".join(map(str, args.indexes))))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.node_loss", description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", type=listed(one_of(MODES.split(","))), default=MODES)
    p.add_argument("--nodes", type=number(int, at_least=1), default=2)
    p.add_argument("--nproc", type=number(int, at_least=1), default=1, help="workers per pod")
    p.add_argument("--steps", type=number(int, at_least=1), default=80)
    p.add_argument("--at", type=number(int, at_least=0), default=40, help="the step at which the node is lost")
    indexes_help = "pod indexes to lose, comma-separated (default: every index)"
    p.add_argument("--indexes", type=listed(number(int, at_least=0)), default=None, help=indexes_help)
    p.add_argument("--node-replace-s", type=number(float, at_least=0), default=5.0)
    p.add_argument("--out", type=Path, default=Path("runs/bench-node-loss"))
    args = parse(p, argv, problems)
    indexes = args.indexes or list(range(args.nodes))
    common = {"steps": args.steps, "nproc": args.nproc, "nodes": args.nodes, "node_replace_s": args.node_replace_s}

    rc, _ = run_local(args.out / "reference", mode="k8s-only", faults="", **common)
    reference = _sha(args.out / "reference") if rc == 0 else None
    if reference is None:
        print(f"the fault-free reference run failed (exit {rc}); see {args.out / 'reference.log'}")
        return 1
    rows = []
    for mode in args.modes:
        for index in indexes:
            run_dir = args.out / f"{mode}-lose{index}"
            rc, _ = run_local(run_dir, mode=mode, faults=f"node-loss@{args.at}:{index}", **common)
            rows.append(_row(mode, index, run_dir, rc, reference))

    print(
        f"\nNode loss on a local CPU cluster (gloo, tiny model; CPU only): {args.nodes} pods x {args.nproc} "
        f"worker(s), node lost at step {args.at} of {args.steps}, replacement after {args.node_replace_s:g} s\n"
    )
    print("| mode | lost index | recovered by | detection s | recovery s | restored step | rollback | same state |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["exit"]:
            print(f"| {r['mode']} | {r['lost_index']} | FAILED (exit {r['exit']}) | | | | | |")
            continue
        print(
            f"| {r['mode']} | {r['lost_index']} | {r.get('layer')} | {fmt(r.get('detection_s'))} "
            f"| {fmt(r.get('recovery_s'))} | {r.get('restored_step')} | {r.get('rollback_steps')} "
            f"| {'yes' if r['same_state'] else 'NO'} |"
        )
    (args.out / "results.json").write_text(json.dumps({"reference_sha256": reference, "rows": rows}, indent=2))
    bad = [r for r in rows if r["exit"] or not r["same_state"]]
    if bad:
        print(f"\n{len(bad)} run(s) failed or ended in another state; see the logs under {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
