"""Local run: CPU workers under ft_launcher (or torchrun) with the in-process wrapper, tiny model.

``python -m training.local --run-dir DIR [--steps N] [--faults SPEC] [--nproc 2] [--mode MODE] [--env ENV] [--fresh]``

Defaults come from ``cfg.local`` (steps, nproc, the fault schedule that exercises every layer, short
CPU timeouts ``cfg.local.inprocess`` / ``cfg.local.ft``). ``--faults ""`` runs without faults.
``--fresh`` empties the run directory first. Progress is read from the run's ``events.jsonl``; the
launcher's own output goes to ``<run_dir>/launcher.log``. In ``k8s-only`` mode a failed launch is
relaunched with ``JOB_ATTEMPT`` + 1 (what Kubernetes' pod restart does), up to ``job.backoff_limit``.

Exits non-zero with a message when the target step was not reached; the launcher's exit is translated
by :func:`training.resilience.exit_codes.translate_launcher_exit` (ft_launcher restarts exhausted -> unrecoverable).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from platform_config import ConfigError, exits_on_config_error, load_config
from platform_config.schema import MODE_LAYERS, RecoveryMode
from training.cluster.node_faults import NODE_FAULT_KINDS, split_schedule
from training.cluster.node_timeline import EksTimeline
from training.common.arguments import Rejected, choices, good, nested, number, parse, port, problem
from training.common.gpus import cuda_device_count
from training.launch.prefork import LAUNCHER_MODULES, SOCKET_ENV
from training.resilience.exit_codes import (
    ExitCode,
    clear_exit_status,
    exit_code_for,
    fail_job_exit_codes,
    translate_launcher_exit,
)
from training.resilience.faults import LAST_STEP, RunShape, random_problems, schedule_problems
from training.resilience.ft_monitor import ft_launcher_args, ft_launcher_yaml
from training.resilience.inprocess import STORE_PORT_ENV
from training.resilience.startup_budget import MEASURED_INIT_ENV, local_timeouts
from training.telemetry.events import EventLog
from training.telemetry.progress import Progress

SUMMARY_FILE = "summary.json"


def worker_command(
    args: argparse.Namespace, mode: RecoveryMode, steps: int, faults: str, *, prefork: bool = False
) -> list[str]:
    """What the launcher runs per worker (after ``python``): ``-m training.train ...``, through the worker template's
    stand-in (``-m training.launch.prefork run training.train ...``) with ``prefork``."""
    cmd = [
        *(["-m", "training.launch.prefork", "run", "training.train"] if prefork else ["-m", "training.train"]),
        "--run-dir",
        str(args.run_dir),
        "--mode",
        mode.value,
        "--steps",
        str(steps),
        "--faults",
        faults,
        "--short-timeouts",
    ]
    if args.env:
        cmd += ["--env", args.env]
    if args.config:
        cmd += ["--config", str(args.config)]
    return cmd


def _measured_init_s(run_dir: Path) -> float | None:
    """The set-up time the run's last launch measured (its ``summary.json``), if any."""
    try:
        return float(json.loads((run_dir / SUMMARY_FILE).read_text())["measured_s"]["init_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _prepare(args: argparse.Namespace, cfg: Any) -> tuple[int, int, str, Path]:
    """(steps, workers per node, fault schedule, run dir) from the flags and ``cfg.local``; empties the run
    directory with ``--fresh``; says so when this is the CPU fallback."""
    run_dir: Path = args.run_dir.resolve()
    args.run_dir = run_dir
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not cuda_device_count():
        size = cfg.model.size
        print(f"== CPU fallback: no CUDA here, so gloo + fp32 on CPU workers (model.size {size}) ==", flush=True)
    faults = cfg.local.faults if args.faults is None else args.faults
    return args.steps or cfg.local.steps, args.nproc or cfg.local.nproc, faults, run_dir


def launch(args: argparse.Namespace) -> int:
    """Run the job; returns the process exit code."""
    from training.checkpoint.shm_scope import SCOPE_ENV, remove_scope

    cfg = load_config(args.config, args.env)
    mode = RecoveryMode(args.mode) if args.mode else cfg.job.mode
    if args.nodes is not None:
        return launch_cluster(args, cfg, mode)
    layers = MODE_LAYERS[mode]
    steps, nproc, faults, run_dir = _prepare(args, cfg)
    port = args.port or cfg.local.rendezvous_port
    print(
        f"== local run: mode {mode.value}, {nproc} workers, {steps} steps, faults {faults or '(none)'} -> {run_dir} ==",
        flush=True,
    )
    env = dict(os.environ)
    env.update(
        {
            STORE_PORT_ENV: str(args.store_port or cfg.local.inprocess_store_port),
            "TORCH_CPP_LOG_LEVEL": "error",
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "PYTHONWARNINGS": "ignore",
        }
    )
    prefork = cfg.job.prefork_workers
    shared = args.template if prefork else None  # a template the caller keeps (--template)
    if shared:
        env[SOCKET_ENV] = str(shared)
    worker = worker_command(args, mode, steps, faults, prefork=prefork)
    measured_init_s = _measured_init_s(run_dir)
    _, ft, budget_lines = local_timeouts(cfg, cuda=cuda_device_count() > 0, measured_init_s=measured_init_s)
    for line in budget_lines:
        print(f"[budget] {line}", flush=True)
    if measured_init_s:
        env[MEASURED_INIT_ENV] = str(measured_init_s)
    if layers.ft_launcher:
        ft_yaml = run_dir / "ft_launcher.yaml"
        ft_yaml.write_text(ft_launcher_yaml(ft))
        launcher = ["ft_launcher", *ft_launcher_args(ft, str(ft_yaml), nproc, port)]
    else:
        launcher = ["torchrun", f"--nproc-per-node={nproc}", "--max-restarts=0", f"--master-port={port}"]
    name = launcher[0]
    # by module; with the template forked from it too, as in a pod: a launch pays no launcher imports
    via = ["training.launch.prefork", "run"] if prefork else []
    launcher = [sys.executable, "-m", *via, LAUNCHER_MODULES[name], *launcher[1:]]
    t0 = time.monotonic()
    progress = Progress(run_dir, args.progress_every, steps, t0)
    progress.start()
    attempts = cfg.job.backoff_limit + 1 if mode == RecoveryMode.K8S_ONLY else 1
    launch_log = EventLog(run_dir)  # job layer, rank -1: the run's wall clock starts with the launch
    code, message = 1, ""
    with open(run_dir / "launcher.log", "a") as logf:
        for attempt in range(attempts):
            env["JOB_ATTEMPT"] = str(attempt)
            # The workers share this machine's /dev/shm: one memory-tier scope per launch, removed after it, as a
            # pod's /dev/shm (an emptyDir of medium Memory) lives and dies with the pod.
            env[SCOPE_ENV] = scope = f"local{os.getpid()}a{attempt}"
            if attempt:
                print(f"[{time.monotonic() - t0:6.1f}s] JOB   pod restart (attempt {attempt}), as Kubernetes would")
            clear_exit_status(run_dir)
            launch_log.emit("launch", launcher=name, nproc=nproc, mode=mode.value, attempt=attempt)
            note = f" (forked from the caller's template at {shared})" if shared else ""
            logf.write(f"== attempt {attempt}{note}: {' '.join(launcher + worker)}\n")
            logf.flush()
            # A pod's worker template (job.prefork_workers) lives and dies with the pod: one per attempt, unless the
            # caller keeps one (--template: the test suite's, which imports the training code once per test worker).
            # Its own /tmp too (TMPDIR), removed after it as a pod's goes with the pod: the launchers' sockets and
            # log directories (torchrun never removes its torchelastic_*, a killed launcher no socket) stay in it.
            prefix = f"training-local-{os.getpid()}a{attempt}-"
            with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as launch_tmp:
                env["TMPDIR"] = launch_tmp
                template = start_template(run_dir, env, logf) if prefork and not shared else None
                try:
                    rc = subprocess.call([*launcher, *worker], env=env, stdout=logf, stderr=logf)
                finally:
                    stop_template(template)
            remove_scope(scope)
            code, message = translate_launcher_exit(
                rc, run_dir, cfg.ft.unrecoverable_exit_code, restarts_exhausted=layers.ft_launcher
            )
            if code == 0 or code in fail_job_exit_codes(cfg.ft.unrecoverable_exit_code):  # as podFailurePolicy
                break
    progress.stop.set()
    progress.join(timeout=5)
    return finish(run_dir, steps, code, message, time.monotonic() - t0, cfg.ft.unrecoverable_exit_code)


def launch_cluster(args: argparse.Namespace, cfg: Any, mode: RecoveryMode) -> int:
    """``--nodes N``: the training Job's manifests on a local cluster of N pods (:mod:`training.cluster`)."""
    from training.cluster.network import ClusterUnavailable
    from training.cluster.runner import ClusterOptions, prepare_manifests, run_cluster

    steps, nproc, faults, run_dir = _prepare(args, cfg)
    print(
        f"== local cluster: Job of mode {mode.value}, {args.nodes} pods x {nproc} workers, {steps} steps, "
        f"faults {faults or '(none)'}, {node_timeline_text(args)} -> {run_dir} ==",
        flush=True,
    )
    if args.template is not None:
        print(f"== pods fork their template from the caller's at {args.template}: warm pods, not a cluster's ==")
    try:
        timeline = EksTimeline().with_overrides(args.timeline_set)
    except ValueError as err:
        print(f"== FAILED: {err} ==", file=sys.stderr, flush=True)
        return int(ExitCode.CONFIG)
    opts = ClusterOptions(
        run_dir=run_dir,
        nodes=args.nodes,
        nproc=nproc,
        steps=steps,
        mode=mode,
        faults=faults,
        node_replace_s=args.node_replace_s,
        backoff_scale=args.backoff_scale,
        timeout_s=args.timeout_s if args.timeout_s is not None else CLUSTER_TIMEOUT_S[args.node_timeline],
        node_timeline=args.node_timeline,
        spare_nodes=args.spare_nodes,
        timeline=timeline,
        progress_every=args.progress_every,
        nvrx_version=args.nvrx_version,
        manifests=args.manifests.resolve() if args.manifests else None,
        host_gpus=args.host_gpus,
        template=args.template,
    )
    t0 = time.monotonic()
    try:
        if args.synth_only:
            print(f"== manifests: {prepare_manifests(cfg, opts)[2]} ==", flush=True)
            return 0
        status = run_cluster(cfg, opts)
    except (ClusterUnavailable, ValueError) as err:  # ManifestError is a ValueError
        print(f"== FAILED: {err} ==", file=sys.stderr, flush=True)
        return int(ExitCode.CONFIG)
    cond = status["conditions"][-1] if status["conditions"] else {"type": "?", "reason": "", "message": ""}
    print(f"== Job {cond['type']}: {cond.get('reason', '')} {cond.get('message', '')} ({run_dir / 'job.json'}) ==")
    code = 0 if cond["type"] == "Complete" else cfg.ft.unrecoverable_exit_code
    message = "" if code == 0 else f"Job {cond['type']}: {cond.get('reason')}: {cond.get('message')}"
    return finish(run_dir, steps, code, message, time.monotonic() - t0, cfg.ft.unrecoverable_exit_code)


def start_template(run_dir: Path, env: dict[str, str], log: Any) -> subprocess.Popen:
    """The worker template (:mod:`training.launch.prefork`) of one launch; sets its socket in ``env`` for workers."""
    env[SOCKET_ENV] = path = f"/tmp/training-prefork-{os.getpid()}-{time.monotonic_ns()}.sock"
    return subprocess.Popen(
        [sys.executable, "-m", "training.launch.prefork", "serve", "--socket", path], env=env, stdout=log, stderr=log
    )


def stop_template(template: subprocess.Popen | None) -> None:
    if template is None:
        return
    template.terminate()
    try:
        template.wait(timeout=10)
    except subprocess.TimeoutExpired:
        template.kill()
        template.wait()


def finish(run_dir: Path, steps: int, code: int, message: str, wall: float, unrecoverable: int) -> int:
    """Print the outcome; non-zero unless the target step was reached."""
    summary_path = run_dir / SUMMARY_FILE
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
    if code == 0 and summary and summary["final_step"] >= steps:
        print(
            f"== OK in {wall:.1f}s: step {summary['final_step']}/{steps}, faults injected "
            f"{summary['faults_injected']}, recovered by layer {summary['restarts_by_layer']}, "
            f"final state sha256 {summary['final_state_sha256'][:16]}... ({summary_path}) ==",
            flush=True,
        )
        return 0
    if code == 0:
        code, message = exit_code_for("exception", unrecoverable), "launcher succeeded but no summary.json"
    reached = summary["final_step"] if summary else "?"
    print(
        f"== FAILED after {wall:.1f}s: target step {steps} not reached (summary step {reached}); "
        f"exit {code}: {message}. Worker output: {run_dir / 'launcher.log'} ==",
        file=sys.stderr,
        flush=True,
    )
    return code


def run_args(
    run_dir: Path,
    *,
    config: dict[str, Any] | None,
    steps: int,
    faults: str,
    mode: str,
    nproc: int,
    fresh: bool = True,
    nodes: int | None = None,
) -> list[str]:
    """The flags of ``python -m training.local`` for a run in ``run_dir`` (created) with ``config``, a project.yaml
    dict written beside it as ``<run dir>.project.yaml``."""
    import yaml

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = run_dir.parent / f"{run_dir.name}.project.yaml"
    cfg_path.write_text(yaml.safe_dump(config or {}))
    args = ["--run-dir", str(run_dir), "--config", str(cfg_path)] + (["--fresh"] if fresh else [])
    args += ["--steps", str(steps), "--faults", faults, "--mode", mode, "--nproc", str(nproc)]
    return args + (["--nodes", str(nodes)] if nodes is not None else [])


def run_local(
    run_dir: Path,
    *,
    config: dict[str, Any] | None = None,
    steps: int,
    faults: str = "",
    mode: str = "inprocess-ft",
    nproc: int = 2,
    ports: tuple[int, int] | None = None,
    timeout_s: float = 240,
    env: dict[str, str] | None = None,
    fresh: bool = True,
    nodes: int | None = None,
    node_replace_s: float | None = None,
    template: str | None = None,
    manifests: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m training.local`` in a subprocess (for tests and scripts); ``config`` is a project.yaml dict.

    ``ports``: (rendezvous, in-process store); distinct per concurrent run. ``fresh``: empty the run directory
    first (False: another launch of the same run). ``nodes``: a local cluster of that many pods (``--nodes``).
    ``template``: a worker template's socket the caller keeps (``--template``); this process is forked from it too.
    ``manifests``: run these (``--manifests``, from ``--synth-only`` with the same flags) instead of synthesizing.
    Output is captured.
    """
    # With a caller's template, this process too is forked from it: no imports of its own (~0.6 CPU-s a run).
    local = ["-m", "training.local"] if template is None else ["-m", "training.launch.prefork", "run", "training.local"]
    cmd = [sys.executable, *local]
    cmd += run_args(
        run_dir, config=config, steps=steps, faults=faults, mode=mode, nproc=nproc, fresh=fresh, nodes=nodes
    )
    if ports:
        cmd += ["--port", str(ports[0]), "--store-port", str(ports[1])]
    if nodes is not None:
        cmd += ["--timeout-s", str(max(10.0, timeout_s - 20))]
    if node_replace_s is not None:
        cmd += ["--node-replace-s", str(node_replace_s)]
    if manifests is not None:
        cmd += ["--manifests", str(manifests)]
    if template is not None:
        from training.launch.prefork import SOCKET_ENV

        cmd += ["--template", template]
        env = {**(os.environ if env is None else env), SOCKET_ENV: template}
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=Path(__file__).parents[1]
    )


#: The local cluster's default Job timeout per node timeline: the eks one waits minutes for a new node.
CLUSTER_TIMEOUT_S = {"fast": 900.0, "eks": 3600.0}


def node_timeline_text(args: argparse.Namespace) -> str:
    if args.node_timeline == "fast":
        return f"node replacement {args.node_replace_s:g} s"
    return f"EKS node timeline, {args.spare_nodes} spare node(s)"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags, checked whole (the fault schedule against the run they describe) before anything starts: a bad
    value ends the command with status 2 and one message naming each (:func:`problems`)."""
    p = argparse.ArgumentParser(prog="training.local", description=__doc__.split("\n\n")[0])
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--steps", type=number(int, at_least=1), default=None, help="default: cfg.local.steps")
    p.add_argument(
        "--faults", default=None, help='kind@step[:rank][/phase][!],... (default: cfg.local.faults); "" = none'
    )
    p.add_argument("--nproc", type=number(int, at_least=1), default=None, help="default: cfg.local.nproc")
    modes = [m.value for m in RecoveryMode]
    p.add_argument("--mode", **choices(modes), help="default: cfg.job.mode")
    p.add_argument("--env", default=None)
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--fresh", action="store_true", help="empty the run directory first")
    p.add_argument("--port", type=port, default=None, help="rendezvous port (default: cfg.local.rendezvous_port)")
    p.add_argument("--store-port", type=port, default=None, help="in-process store port")
    every = number(int, at_least=1)
    p.add_argument("--progress-every", type=every, default=20, help="print a progress line every N steps")
    p.add_argument(
        "--template",
        type=Path,
        default=None,
        help="fork the launcher and workers from the worker template the caller keeps at this socket "
        "(python -m training.launch.prefork serve --socket PATH) instead of starting one per launch; with --nodes, "
        "each pod's template is forked from it into the pod (for tests: pods then start faster than a cluster's)",
    )
    cluster = p.add_argument_group("local cluster (--nodes): the training Job's manifests as N pods of namespaces")
    cluster.add_argument("--nodes", type=number(int, at_least=1), default=None, help="pods (default: one launcher)")
    seconds = number(float, at_least=0)
    cluster.add_argument("--node-replace-s", type=seconds, default=5.0, help="node loss -> replacement pod may start")
    cluster.add_argument("--backoff-scale", type=seconds, default=0.1, help="x Kubernetes' 10 s..6 min pod back-off")
    cluster.add_argument(
        "--timeout-s",
        type=number(float, above=0),
        default=None,
        help="fail the Job after this long (default: 900 s, 3600 s with --node-timeline eks)",
    )
    cluster.add_argument(
        "--node-timeline",
        **choices(CLUSTER_TIMEOUT_S),
        default="fast",
        help="fast: a lost node's replacement may start --node-replace-s later; eks: EKS's own timeline (NotReady, "
        "taint eviction, PodGC, spares, new nodes, fencing; training/cluster/node_timeline.py)",
    )
    cluster.add_argument(
        "--spare-nodes", type=number(int, at_least=0), default=0, help="with --node-timeline eks: idle GPU nodes"
    )
    cluster.add_argument(
        "--timeline-set",
        action="append",
        default=[],
        metavar="KEY=SECONDS",
        help="with --node-timeline eks: override one duration of the timeline (e.g. provision_s=60, fence=0)",
    )
    cluster.add_argument("--synth-only", action="store_true", help="synthesize the manifests, print where, stop")
    cluster.add_argument("--manifests", type=Path, default=None, help="run these (--synth-only's) instead")
    cluster.add_argument("--nvrx-version", default=None, help="the manifests' NVRx (default: the installed one)")
    cluster.add_argument(
        "--host-gpus",
        type=number(int, at_least=0),
        default=None,
        help="with --synth-only: the GPUs of the host that will run the manifests (its local timeouts; default: "
        "this host's), for a GPU host without Node.js for cdk8s",
    )
    return parse(p, argv, problems)


def problems(args: argparse.Namespace) -> list[str]:
    """What is wrong with ``args`` beyond each value on its own: flags that need ``--nodes``, and the fault schedule
    (``--faults``, else ``local.faults``) against the run: ranks below ``--nproc`` x ``--nodes``, steps within
    ``--steps``, node faults only on a local cluster. The configuration is loaded for the defaults; its errors join
    the message when the flags have some too (alone, they end the command as every configuration error does)."""
    lines = []
    if args.host_gpus is not None and not (args.synth_only and good(args.nodes)):
        lines.append(
            problem("--host-gpus", "with --nodes N --synth-only only: a run uses this host's GPUs", args.host_gpus)
        )
    for flag, given in (("--synth-only", args.synth_only), ("--manifests", args.manifests)):
        if given and args.nodes is None:
            lines.append(f"{flag}: with --nodes N only (a local cluster's manifests)")
    if args.run_dir.exists() and not args.run_dir.is_dir():
        lines.append(problem("--run-dir", "a directory, or a path to create one at", str(args.run_dir)))
    for item in args.timeline_set:  # each bad KEY=SECONDS named (the cluster's own check stops at the first)
        try:
            EksTimeline().with_overrides([item])
        except ValueError as err:
            lines.append(str(err))
    if good(args.port) and args.port == args.store_port:
        lines.append(problem("--store-port", "a port other than --port's (both listen on this host)", args.store_port))
    try:
        cfg = load_config(args.config, args.env)
    except ConfigError as err:
        if lines or any(isinstance(v, Rejected) for v in vars(args).values()):
            return [*lines, nested(str(err))]
        raise
    return lines + fault_problems(args, cfg)


def fault_problems(args: argparse.Namespace, cfg: Any) -> list[str]:
    """The fault schedule's entries that are malformed or would never fire in the run ``args`` describe."""
    flag = "local.faults" if args.faults is None else "--faults"
    spec = cfg.local.faults if args.faults is None else args.faults
    known = not any(isinstance(v, Rejected) for v in (args.steps, args.nproc, args.nodes))  # the run's shape
    steps, nproc, nodes = args.steps or cfg.local.steps, args.nproc or cfg.local.nproc, args.nodes or 1
    in_pod, lines = [], []
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        if entry.split("@", 1)[0] not in NODE_FAULT_KINDS:
            in_pod.append(entry)
        elif args.nodes is None:
            lines.append(f"{flag} {entry!r}: a node fault needs a local cluster (--nodes N)")
        elif known:
            lines += node_fault_problems(entry, nodes, steps, flag)
    world = f" ({'--nproc' if args.nproc else 'local.nproc'} {nproc}" + (f" x --nodes {nodes})" if args.nodes else ")")
    run = RunShape(steps, nproc * nodes, cfg.train.eval_interval, world) if known else None
    lines += [f"{flag} {line}" for line in schedule_problems(",".join(in_pod), run)]
    return lines + (random_problems(cfg.faults.random.count, steps) if known else [])


def node_fault_problems(entry: str, nodes: int, steps: int, flag: str) -> list[str]:
    """A node fault's problems (:func:`training.cluster.node_faults.split_schedule`'s, and a step past the run)."""
    try:
        (fault,), _ = split_schedule(entry, nodes)
    except ValueError as err:
        return [f"{flag}: {err}"]
    if fault.step > steps:
        return [f"{flag} {problem(repr(entry), f'step must be at most {steps}: {LAST_STEP}', fault.step)}"]
    return []


@exits_on_config_error
def main(argv: list[str] | None = None) -> int:
    # SIGTERM (an outer timeout, a benchmark stopping its run) unwinds like Ctrl-C: the local cluster's ``finally``
    # kills its pods, and a local launcher is killed by ``subprocess.run`` on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    return launch(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
