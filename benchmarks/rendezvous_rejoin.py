"""Rejoin after a lost node: how long ft_launcher's rendezvous takes to form the next round when one of two agents
is killed with its workers and a replacement agent starts some seconds later.

``python -m benchmarks.rendezvous_rejoin [--replace-after-s 1,5] [--hold-s 0] [--out runs/bench-rejoin]``

Two ft_launcher agents on this machine, one worker each (gloo on CPU: a loop of all-reduces, no training), c10d
rendezvous on 127.0.0.1 with node 0's agent hosting the store (``is_host``), as pod 0 hosts it in the training Job.
Once both workers run, node 1's agent and every process under it get SIGKILL (a lost node: nothing is told) and a
replacement agent starts ``--replace-after-s`` later (a spare node's pod). Printed per delay: the seconds from the
loss to the survivor's worker exit, to the replacement's start and to the next round's two workers running.
``--hold-s H``: the survivor's worker, once its all-reduce fails, stays alive H s before it exits, as an NCCL worker
stays held in its collective (gloo fails at once): does the replacement's arrival restart a worker that still looks
healthy, or does the next round wait for it to end? (NVRx 0.4.1 restarts it, 0.7.0 waits: docs/benchmarks.md,
2026-12-04.)

What it isolates: the launcher's rule for a dead participant. NVRx 0.4.1's ``FtRendezvousHandler`` keeps a node
in the complete round until its keep-alive is 3 x 5 s old (hard-coded), so the next round waits for that whatever
the replacement does; NVRx 0.7.0 has a barrier rendezvous that opens fresh keys per round. The installed NVRx
version is printed with the table. Not measured here: the loss of node 0, whose store goes with it (the survivor's
agent then ends with ``RendezvousConnectionError``; the Job restarts the group, docs/kubernetes.md), and torchrun,
whose agents do not take a replacement into a running job (its modes restart the whole group).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common import fmt
from training.common.arguments import listed, number, parse, port, problem
from training.launch.prefork import LAUNCHER_MODULES

#: The two agents: node 0 hosts the rendezvous store and survives, node 1 is lost and replaced.
SURVIVOR, LOST, REPLACEMENT = "node0", "node1", "replacement"

#: The worker each agent runs: it records its start and its end, and all-reduces until its peer is gone.
WORKER = """\
import datetime, json, os, sys, time
import torch
import torch.distributed as dist

out = sys.argv[1]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
record = {"agent": os.environ["REJOIN_AGENT"], "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)),
          "pid": os.getpid(), "rank": dist.get_rank()}
with open(os.path.join(out, f"start-{os.getpid()}.json"), "w") as f:
    json.dump({**record, "t": time.time()}, f)
t = torch.zeros(1)
try:
    while True:
        dist.all_reduce(t)
        time.sleep(0.05)
except Exception as exc:
    time.sleep(float(os.environ.get("REJOIN_HOLD_S", "0")))  # held as in an NCCL collective (--hold-s)
    with open(os.path.join(out, f"exit-{os.getpid()}.json"), "w") as f:
        json.dump({**record, "t": time.time(), "error": type(exc).__name__}, f)
    sys.exit(1)
"""


@dataclass(frozen=True)
class Rejoin:
    """One loss: seconds from the loss to the survivor's worker exit, the replacement's start and the next round."""

    replace_after_s: float
    survivor_exit_s: float | None
    replacement_start_s: float
    rejoin_s: float | None

    @property
    def wait_after_replacement_s(self) -> float | None:
        """How long the next round took once the replacement agent had started."""
        return None if self.rejoin_s is None else self.rejoin_s - self.replacement_start_s


def timeline(records: list[dict[str, Any]], *, t_loss: float, t_replace: float, delay: float) -> Rejoin:
    """The :class:`Rejoin` of one loss from the workers' records (``kind`` start or exit, ``agent``, ``t``): the
    survivor's first exit after the loss, and the next round once a new worker of the survivor and a worker of the
    replacement have both started."""
    exits = [r["t"] for r in records if r["kind"] == "exit" and r["agent"] == SURVIVOR and r["t"] >= t_loss]
    restarted = [r["t"] for r in records if r["kind"] == "start" and r["agent"] == SURVIVOR and r["t"] > t_loss]
    joined = [r["t"] for r in records if r["kind"] == "start" and r["agent"] == REPLACEMENT]
    rejoin = max(min(restarted), min(joined)) - t_loss if restarted and joined else None
    return Rejoin(delay, min(exits) - t_loss if exits else None, t_replace - t_loss, rejoin)


def read_records(out: Path) -> list[dict[str, Any]]:
    """Every worker's ``start-*.json`` and ``exit-*.json`` in ``out``, with ``kind`` set."""
    return [
        {**json.loads(p.read_text()), "kind": p.name.split("-", 1)[0]}
        for p in sorted(out.glob("*.json"))
        if p.name.startswith(("start-", "exit-"))
    ]


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL ``proc`` and every process below it, as a lost node ends them (the launchers start their workers in
    new sessions, so a process group does not hold them)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        parent = psutil.Process(proc.pid)
        for p in [parent, *parent.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
    proc.wait()


class Agents:
    """ft_launcher agents of one two-node job on this machine."""

    def __init__(self, out: Path, port: int, hold_s: float = 0.0) -> None:
        self.module, self.out, self.port, self.hold_s = LAUNCHER_MODULES["ft_launcher"], out, port, hold_s
        (out / "worker.py").write_text(WORKER)
        self.procs: dict[str, subprocess.Popen[Any]] = {}

    def start(self, agent: str, node: int) -> None:
        cmd = [
            sys.executable, "-m", self.module, "--nnodes", "2", "--nproc-per-node", "1", "--max-restarts", "5",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{self.port}", "--rdzv-id", "rejoin",
            "--rdzv-conf", f"is_host={int(node == 0)}", str(self.out / "worker.py"), str(self.out),
        ]  # fmt: skip
        log = (self.out / f"agent-{agent}.log").open("w")
        # NVRx 0.7.0 closes a rendezvous with two launchers on one host unless told it is a simulation (0.4.1: unread).
        env = {**os.environ, "REJOIN_AGENT": agent, "NVRX_ENABLE_MULTI_LAUNCHERS_PER_NODE": "1"}
        env["REJOIN_HOLD_S"] = f"{self.hold_s:g}"
        self.procs[agent] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)

    def wait_for(self, what: str, ready: Any, timeout_s: float, lost: str | None = None) -> None:
        """Until ``ready(records)``; an agent that ended (other than ``lost``) or the timeout is an error."""
        deadline = time.monotonic() + timeout_s
        while not ready(read_records(self.out)):
            ended = [a for a, p in self.procs.items() if a != lost and p.poll() is not None]
            if ended or time.monotonic() > deadline:
                why = f"agent {ended[0]} exited {self.procs[ended[0]].returncode}" if ended else f"{timeout_s:.0f} s"
                raise RuntimeError(f"no {what}: {why}; see {self.out}/agent-*.log")
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                kill_tree(proc)


def measure(out: Path, *, delay: float, port: int, hold_s: float = 0.0, timeout_s: float = 120.0) -> Rejoin:
    """One job: both agents up, node 1 lost, a replacement ``delay`` s later (the survivor's worker held ``hold_s``
    after its failed all-reduce); the :class:`Rejoin`."""
    out.mkdir(parents=True, exist_ok=False)
    agents = Agents(out, port, hold_s)
    try:
        agents.start(SURVIVOR, 0)
        agents.start(LOST, 1)
        started = lambda rs: {r["agent"] for r in rs if r["kind"] == "start"} >= {SURVIVOR, LOST}  # noqa: E731
        agents.wait_for("the first round", started, timeout_s)
        time.sleep(1.0)  # a few all-reduces in the formed world
        t_loss = time.time()
        kill_tree(agents.procs[LOST])
        time.sleep(delay)
        t_replace = time.time()
        agents.start(REPLACEMENT, 1)
        agents.wait_for(
            "the next round",
            lambda rs: timeline(rs, t_loss=t_loss, t_replace=t_replace, delay=delay).rejoin_s is not None,
            timeout_s,
            lost=LOST,
        )
        records = read_records(out)
    finally:
        agents.stop()
    return timeline(records, t_loss=t_loss, t_replace=t_replace, delay=delay)


def nvrx_version() -> str:
    try:
        return version("nvidia-resiliency-ext")
    except PackageNotFoundError:
        return "not installed"


def problems(args: argparse.Namespace) -> list[str]:
    """An ``--out`` that holds files already (the runs' logs would mix with them)."""
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        return [problem("--out", "an empty or new directory", str(args.out))]
    return []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.rendezvous_rejoin", description=__doc__.split("\n\n")[0])
    seconds = number(float, at_least=0)
    p.add_argument("--replace-after-s", type=listed(seconds), default="1,5", help="replacement delays, in seconds")
    p.add_argument(
        "--hold-s", type=seconds, default=0.0, help="the survivor's worker stays this long after its failure"
    )
    p.add_argument("--port", type=port, default=29640, help="the rendezvous port on 127.0.0.1")
    p.add_argument("--out", type=Path, default=Path("runs/bench-rejoin"))
    args = parse(p, argv, problems)
    delays = args.replace_after_s
    rows = []
    for i, delay in enumerate(delays):
        print(f"[rejoin] node 1 lost, replacement after {delay:g} s ...", flush=True)
        rows.append(measure(args.out / f"delay-{delay:g}", delay=delay, port=args.port + i, hold_s=args.hold_s))
    held = f", the survivor's worker held {args.hold_s:g} s after its failure" if args.hold_s else ""
    print(f"\nft_launcher, NVRx {nvrx_version()}, node 1 of 2 lost (CPU workers, gloo, both agents on this host{held})")
    print("| replaced after s | survivor's worker exit s | replacement start s | next round s | after replacement s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.replace_after_s:g} | {fmt(r.survivor_exit_s)} | {fmt(r.replacement_start_s)} | {fmt(r.rejoin_s)} "
              f"| {fmt(r.wait_after_replacement_s)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
