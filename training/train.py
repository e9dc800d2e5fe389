"""Training entry point: distributed init + Trainer + faults + ft monitor + in-process wrapper.

``python -m training.train --config PATH --run-dir DIR [--env ENV] [--mode MODE] [--faults SPEC]
[--steps N] [--fresh] [--short-timeouts]``

Run one process per rank under ``ft_launcher`` (modes with ft_launcher) or ``torchrun``. What is on
comes from ``cfg.layers`` (``cfg.job.mode``, or ``--mode``); ``--local`` swaps in ``cfg.local.inprocess``
and ``cfg.local.ft`` (short CPU timeouts). Restart events are emitted by the layer that recovered:

- in-process: on Wrapper re-entry (``CallWrapper.iteration`` grew) -> ``restart_begin`` (cause, layer
  ``inprocess``), then ``restart_end`` once the state is restored;
- ft_launcher: a new worker whose ``TORCHELASTIC_RESTART_COUNT`` is above 0 -> the same pair with layer
  ``ft_launcher``; the cause is the newest fault in the persisted fault state, else ``worker_failure``;
- job (Kubernetes): a first worker of a new pod (``JOB_ATTEMPT`` > 0) -> layer ``job``.

Exit codes: :mod:`training.resilience.exit_codes`. Rank 0 writes ``summary.json`` when the target step is reached.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

from platform_config import ConfigError, load_config
from platform_config.schema import MODE_LAYERS, ProjectConfig, RecoveryMode
from training.common.arguments import USAGE_ERROR, choices, good, message, number, rejected
from training.common.files import atomic_write_json
from training.common.process_start import process_start_ts
from training.resilience import sigterm, timeout_check
from training.resilience.exit_codes import (
    ExitCode,
    check_codes,
    write_exit_status,
)
from training.resilience.exit_policy import Exit, exit_policy, record_exit
from training.resilience.faults import RunShape, fired_faults, random_problems, schedule_problems
from training.resilience.hooks import PhaseClock
from training.resilience.inprocess import (
    apply_process_env,
    build_wrapper,
    store_port,
    wrap,
)
from training.resilience.restarts import previous_start_ns, record_entry, restart_layer
from training.resilience.startup_budget import MEASURED_INIT_ENV, local_timeouts
from training.resilience.worker import WorkerResilience
from training.telemetry.emf import EmfEmitter
from training.telemetry.events import LAYERS, EventLog

SUMMARY_FILE = "summary.json"
#: Written by rank 0 once a restore under ``--fresh`` completed: every later restart or launch ignores ``--fresh``.
FRESH_MARKER = "fresh_start.json"
#: The worker's start-up phases, each a ``phase`` event (``s``: its seconds): ``imports`` (process start -> the Wrapper
#: is built; ``start_ts`` is the process's start), ``wrapper`` (NVRx forks its monitor and meets the other ranks),
#: then on every entry ``process_group``, ``model`` (data, model, FSDP, optimizer), ``restore`` and ``first_step``.
PHASES = ("imports", "wrapper", "process_group", "model", "restore", "first_step")


class Runner:
    """The function the in-process Wrapper calls (once per iteration), or called once without it: the trainer's
    life in one entry. It composes what it holds, each through its own protocol: the event log and its EMF metrics
    (``events``, ``emf``), the resilience side (``resilience``: ledger, faults, ft monitor, hooks, tracker), the
    process group of each iteration (``groups``) and the start-up phase clock."""

    def __init__(self, cfg: ProjectConfig, args: argparse.Namespace, mode: RecoveryMode) -> None:
        self.cfg = cfg
        self.args = args
        self.mode = mode
        self.layers = MODE_LAYERS[mode]
        self.run_dir: Path = args.run_dir
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.steps = args.steps or cfg.train.steps
        self.events = EventLog(self.run_dir, self.rank, layer=self._default_layer())
        self.emf = EmfEmitter(cfg)
        self.emf.follow(self.events)
        self.resilience = WorkerResilience.build(
            cfg, self.layers, self.run_dir, self.rank, self.world_size, self.steps, args.faults, self.events
        )
        self.entered_ns = previous_start_ns(self.run_dir, self.rank)
        self.clock = PhaseClock(self.events)
        self.groups: Any = None  # training.parallel.iteration_group.IterationGroups, made on the first entry
        self.last_step = 0
        self.completed = False  # the target step was reached (the exit code is 0 whatever teardown does)
        self.summary: dict[str, Any] | None = None
        self._wrapped = False

    def _default_layer(self) -> str:
        if self.layers.inprocess:
            return "inprocess"
        return "ft_launcher" if self.layers.ft_launcher else "job"

    def __call__(self, call_wrapper: Any = None) -> int:
        from training.parallel.iteration_group import IterationGroups
        from training.trainer import Trainer

        restart = self._enter(call_wrapper)
        self.groups = self.groups or IterationGroups(self.cfg.inprocess)
        self.clock.lap("process_group", **self.groups.init(self.events.iteration, self.rank, self.world_size))
        hooks = self.resilience.hooks
        trainer = Trainer(
            self.cfg,
            self.run_dir,
            self.events,
            checkpoint_mode=self.layers.checkpoint_mode,
            memory_tier=self.layers.memory_tier,
            target_steps=self.steps,
            hooks=hooks,
            allow_fresh_start=self._fresh_allowed(),
        )
        finished = False
        try:
            self._prepare(trainer, restart)
            final = trainer.train()
            with hooks.section("checkpoint"):  # the last write, as long as the checkpoint section allows
                trainer.ckpt.drain(*trainer.ckpt.keepalive)
            hooks.pings.release()  # the closing save and teardown are no steps
            self._complete(trainer, final)
            finished = True
            return final
        except Exception as err:
            self.last_step = max(self.last_step, getattr(trainer, "step", 0) or 0)
            self.resilience.record_failure(err, self.last_step)
            raise
        finally:
            with contextlib.suppress(Exception):
                trainer.close(failed=not finished)  # a failure in setup/restore too: no collectives
            if finished:
                from training.parallel import distributed

                distributed.destroy_process_group()
            # On the error path the group is left alone: under the in-process layer NVRx's monitor thread
            # aborts and destroys it (destroying it here as well raced that abort: on NCCL, heap corruption and
            # SIGABRT); without that layer the process exits next.

    def _enter(self, call_wrapper: Any) -> tuple[str, str] | None:
        """Bookkeeping of an entry: rank, restart events, the rank-monitor connection; returns the restart, if any."""
        iteration = call_wrapper.iteration if call_wrapper is not None else 0
        self.rank = int(os.environ.get("RANK", self.rank))
        self.world_size = int(os.environ.get("WORLD_SIZE", self.world_size))
        self.events.rank = self.rank
        self.events.iteration = iteration
        tracker = self.resilience.tracker
        restart = restart_layer(self.layers, self.run_dir, self.entered_ns, iteration, tracker.cause)
        entered_ns = time.time_ns()
        self.resilience.connect(call_wrapper)
        if restart:
            layer, cause = restart
            extra = {"detected_ts": tracker.detected_ts} if layer == "inprocess" else {}
            self.events.emit("restart_begin", cause=cause, layer=layer, emit_layer=layer, **extra)
            print(f"[train] rank {self.rank}: {layer} restart #{iteration or ''} after {cause}", flush=True)
            self.resilience.resume(self.last_step)
        self.entered_ns = entered_ns
        if iteration > 0:  # a later process of this rank must not take a fault recovered here for its own cause
            record_entry(self.run_dir, self.rank, entered_ns)
        self.resilience.entered()
        if iteration == 0 and call_wrapper is not None and not self._wrapped:
            self.clock.lap("wrapper")  # NVRx built its monitor process and met the other ranks
        else:
            self.clock.restart()
        self._wrapped = True
        return restart

    def _prepare(self, trainer: Any, restart: tuple[str, str] | None) -> None:
        """Set up and restore the trainer (timed phases), then the restart's end."""
        from training.parallel import distributed

        dev, mem = str(distributed.device()), distributed.device_memory_mb()
        self.events.emit("start", world_size=self.world_size, mode=self.mode.value, device=dev, **mem)
        trainer.setup()
        # Waits on a write in flight keep the rank alive to ft_launcher and NVRx, within the checkpoint section timeout
        trainer.ckpt.keepalive = (
            self.resilience.hooks.keepalive,
            timeout_check.checkpoint_wait_s(self.cfg.ft.section_timeouts_s["checkpoint"]),
        )
        self.clock.lap("model", meta=trainer.on_meta)
        resumed = trainer.restore()
        self.clock.lap("restore")
        self.resilience.hooks.clock = self.clock  # the first heartbeat laps ``first_step``
        if trainer.allow_fresh_start and self.rank == 0:
            atomic_write_json(self.run_dir / FRESH_MARKER, {"ns": time.time_ns(), "resumed_step": resumed})
        if restart:
            self.events.emit("restart_end", layer=restart[0], emit_layer=restart[0], resumed_step=resumed)

    def _complete(self, trainer: Any, final: int) -> None:
        """The target was reached: digest, close, summary."""
        self.last_step = final
        digest = trainer.state_digest()
        trainer.close()
        self.completed = final >= self.steps  # trained and saved
        if self.rank == 0:
            self.summary = write_summary(self, final, digest)

    def _fresh_allowed(self) -> bool:
        """``--fresh`` holds for the first launch of a run only: not once a restore under it has completed."""
        marker = self.run_dir / FRESH_MARKER
        if self.args.fresh and marker.exists():
            if self.rank == 0:
                print(f"[train] --fresh ignored: this run already started fresh ({marker})", flush=True)
            return False
        return bool(self.args.fresh)


def write_summary(runner: Runner, final: int, digest: str) -> dict[str, Any]:
    """``summary.json``; ``restarts_by_layer`` counts the faults each layer recovered (``goodput.analyze``: all ranks'
    restarts for one fault are one recovery, by the outermost layer involved)."""
    from training.telemetry.goodput import analyze, load_events

    run = analyze(load_events(runner.run_dir).events)
    by_layer = dict.fromkeys(LAYERS, 0)
    for fault in run.faults:
        if fault.layer in by_layer:
            by_layer[fault.layer] += 1
    fired = sorted(f"{key} (rank {rank})" for rank, key in fired_faults(runner.run_dir))
    # Node faults are fired by the cluster (the local runner), which logs them as events only.
    fired += sorted(f"{f.kind}@{f.step} (pod {f.pod})" for f in run.faults if f.injected and f.pod is not None)
    summary = {
        "final_step": final,
        "target_steps": runner.steps,
        "final_state_sha256": digest,
        "faults_injected": len(fired),
        "faults": fired,
        "restarts_by_layer": by_layer,
        "mode": runner.mode.value,
        "world_size": runner.world_size,
        "measured_s": runner.resilience.hooks.measured,
    }
    atomic_write_json(runner.run_dir / SUMMARY_FILE, summary)
    return summary


def _abandon_async_saves() -> None:
    """In-process fault cleanup: abandon NVRx async saves left open by the failed iteration."""
    from training.checkpoint.manager import abandon_async_saves

    if abandon_async_saves():
        print(f"[train] rank {os.environ.get('RANK', '?')}: abandoned the failed iteration's async saves", flush=True)


def _monitor_log_dir(run_dir: Path) -> Path:
    """Where NVRx's in-process monitor processes write ``inprocess_monitor_<rank>.log``."""
    path = run_dir / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags, checked whole before anything starts (:func:`problems`); a bad value ends the worker with status 2
    and one message naming each, recorded as its exit status (``config``: the Job fails instead of restarting)."""
    p = argparse.ArgumentParser(prog="training.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=None, help="project.yaml (default: the repository's)")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--env", default=None, help="environments: key of project.yaml")
    modes = [m.value for m in RecoveryMode]
    p.add_argument("--mode", **choices(modes), help="default: cfg.job.mode")
    p.add_argument("--faults", default=None, help="kind@step[:rank][/phase][!],... (default: cfg.faults.schedule)")
    p.add_argument("--steps", type=number(int, at_least=1), default=None, help="target step (default: cfg.train.steps)")
    p.add_argument(
        "--fresh",
        action="store_true",
        help=f"allow a fresh start although checkpoints exist; first launch only (<run-dir>/{FRESH_MARKER})",
    )
    p.add_argument("--short-timeouts", action="store_true", help="cfg.local timeouts (short; scaled on CUDA)")
    args = p.parse_args(argv)
    lines = rejected(p, args) + problems(args)
    if lines:
        text = message(p.prog, lines)
        if args.run_dir.is_dir():  # under a launcher: it passes the cause on instead of a restart budget spent
            with contextlib.suppress(OSError):
                rank = int(os.environ.get("RANK", "0"))
                write_exit_status(args.run_dir, int(ExitCode.CONFIG), "config", text[:2000], rank, final=True)
        p.exit(USAGE_ERROR, text)
    return args


def problems(args: argparse.Namespace) -> list[str]:
    """The fault schedule (``--faults``, else ``faults.schedule``) against the run: entries that are malformed, or
    would never fire (a rank outside the launcher's world ``WORLD_SIZE``, a step past ``--steps`` or
    ``train.steps``, an eval fault after the last evaluation), and random faults that do not fit. A configuration
    that does not load is left to :func:`setup`, which reports it as every configuration error."""
    cfg = None
    with contextlib.suppress(ConfigError):
        cfg = load_config(args.config, args.env)
    steps = args.steps if args.steps is not None else cfg.train.steps if cfg else None
    steps = steps if good(steps) else None
    world = os.environ.get("WORLD_SIZE", "")
    every = cfg.train.eval_interval if cfg else None
    shape = RunShape(steps, int(world) if world.isdigit() else None, every, f" (WORLD_SIZE {world})")
    if args.faults is None and cfg is not None:
        flag, spec = "faults.schedule", cfg.faults.schedule
    else:
        flag, spec = "--faults", args.faults
    lines = [f"{flag} {line}" for line in schedule_problems(spec, shape)]
    if cfg is not None and steps:
        lines += random_problems(cfg.faults.random.count, steps)
    return lines


def resolve_config(args: argparse.Namespace) -> tuple[ProjectConfig, RecoveryMode]:
    """The config (with local timeouts if ``--local``) and the recovery mode."""
    cfg = load_config(args.config, args.env)
    if args.short_timeouts:
        import torch

        port = cfg.local.inprocess_store_port
        measured = float(os.environ.get(MEASURED_INIT_ENV) or 0) or None
        inprocess, ft, _ = local_timeouts(cfg, cuda=torch.cuda.is_available(), measured_init_s=measured)
        cfg = cfg.model_copy(
            update={
                "inprocess": inprocess,
                "ft": ft,
                "job": cfg.job.model_copy(update={"inprocess_store_port": port}),
            }
        )
    mode = RecoveryMode(args.mode) if args.mode else cfg.job.mode
    check_codes(cfg.ft.unrecoverable_exit_code)
    return cfg, mode


def check_memory_fit(cfg: ProjectConfig) -> None:
    """Raise ConfigError when the model's sharded training state cannot fit this rank's memory at this world size
    (:func:`~training.model.memory_fit.fit_problem`), before anything is built; a Hugging Face checkpoint's shape is
    known only once it is read, so it is not checked here."""
    if cfg.model.hf_checkpoint:
        return
    from training.model.memory_fit import fit_problem
    from training.parallel.distributed import device_capacity

    world = int(os.environ.get("WORLD_SIZE", "1"))
    problem = fit_problem(cfg.model.size, world, *device_capacity())
    if problem:
        raise ConfigError(problem)


def setup(args: argparse.Namespace) -> Runner:
    """Config, process environment, signals, the static timeout checks and the eager imports; the Runner."""
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "error")
    cfg, mode = resolve_config(args)
    check_memory_fit(cfg)
    layers = MODE_LAYERS[mode]
    if layers.inprocess:
        changed = apply_process_env()
        if int(os.environ.get("RANK", "0")) == 0:
            for name, (old, new) in changed.items():
                if old is not None:
                    print(f"[train] in-process layer: {name}={new} (was {old})", flush=True)
    runner = Runner(cfg, args, mode)
    sigterm.install()
    for f in timeout_check.check_static(cfg, inprocess=layers.inprocess, ft_launcher=layers.ft_launcher):
        if runner.rank == 0:
            print(f"[timeout-check] {f}", flush=True)
    # Import the heavy modules before entering the Wrapper: an asynchronous RankShouldRestart that lands in the middle
    # of an import leaves a half-initialised module behind (seen on CPU: a fault during another rank's setup broke
    # torch._dynamo, which FSDP2's fully_shard imports, for every later iteration).
    import torch._dynamo  # noqa: F401

    import training.trainer  # noqa: F401

    # What the imports made lives as long as the process: out of the collector's sight, every later collection is
    # shorter (NVRx collects until nothing is left after each in-process restart). main() kept the collector off
    # until here: the imports allocate objects that all live, and collecting them meanwhile cost ~0.4 of 2.2 CPU-s.
    gc.enable()
    gc.collect()
    gc.freeze()
    start_ts = _process_start_ts()
    runner.clock.t = time.monotonic() - (time.time() - start_ts)  # the imports phase counts from the process's start
    runner.clock.lap("imports", start_ts=start_ts)
    return runner


def call(runner: Runner) -> None:
    """Run the training function: inside NVRx's in-process Wrapper when that layer is on, else once."""
    if not runner.layers.inprocess:
        runner()
        return
    cfg = runner.cfg
    world = runner.world_size
    wrapper = build_wrapper(
        cfg.inprocess,
        port=store_port(cfg.job.inprocess_store_port),
        min_world_size=min(cfg.inprocess.min_world_size or world, world),
        tracker=runner.resilience.tracker,
        log_dir=_monitor_log_dir(runner.run_dir),
        on_fault=[_abandon_async_saves],
    )
    wrap(wrapper, runner)()


def run(args: argparse.Namespace) -> int:
    """Train; returns the process exit code."""
    runner = setup(args)
    unrecoverable = runner.cfg.ft.unrecoverable_exit_code
    err: BaseException | None = None
    try:
        call(runner)
    except BaseException as raised:
        err = raised
    out = exit_policy(
        err, runner.resilience.tracker, completed=runner.completed, ft_launcher=runner.layers.ft_launcher,
        rank=runner.rank, unrecoverable=unrecoverable,
    )  # fmt: skip
    if out.code:
        record_exit(out, args.run_dir, runner.rank, unrecoverable)
    _finish(runner, out)
    return out.code


def _finish(runner: Runner, out: Exit) -> None:
    runner.resilience.leave(out)
    runner.events.emit("exit", reason=out.cause, code=out.code, step=runner.last_step)
    if runner.summary is not None:  # rank 0 of a finished run: the run's goodput
        runner.emf.run_goodput()
    runner.resilience.monitor.shutdown()
    if runner.summary is not None:
        s = runner.summary
        print(
            f"[train] done: step {s['final_step']}/{s['target_steps']}, restarts {s['restarts_by_layer']}, "
            f"faults {s['faults_injected']}, state sha256 {s['final_state_sha256'][:16]}...",
            flush=True,
        )


def _process_start_ts() -> float:
    """When this process started (wall clock): from /proc to the clock tick, else psutil's (up to 1 s early)."""
    start = process_start_ts()
    if start is not None:
        return start
    import psutil

    return psutil.Process().create_time()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    gc.disable()  # through the imports; setup() turns it back on
    try:
        return run(args)
    except (ValueError, OSError) as err:  # configuration / argument problems before training starts
        print(f"[train] configuration error: {err}", file=sys.stderr)
        with contextlib.suppress(OSError):  # a launcher passes the cause on instead of restarting the worker
            rank = int(os.environ.get("RANK", "0"))
            write_exit_status(args.run_dir, int(ExitCode.CONFIG), "config", str(err)[:2000], rank, final=True)
        return int(ExitCode.CONFIG)
    finally:
        gc.enable()


if __name__ == "__main__":
    exit_code = main()
    # Skip interpreter teardown: with FSDP2 on gloo it sometimes aborts ("terminate called without an active
    # exception", exit -6) after a clean destroy_process_group, which would turn a success into a failure.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
