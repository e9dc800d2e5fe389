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
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platform_config import load_config
from platform_config.schema import MODE_LAYERS, ProjectConfig, RecoveryMode
from training.common.arguments import USAGE_ERROR, good, message, number, one_of, rejected
from training.common.files import atomic_write_json
from training.common.process_start import process_start_ts
from training.resilience import sigterm, timeout_check
from training.resilience.exit_codes import (
    ExitCode,
    FailureLedger,
    UnrecoverableError,
    check_codes,
    classify,
    exit_code_for,
    fail_job_exit_codes,
    write_exit_status,
)
from training.resilience.faults import FaultInjector, RunShape, fired_faults, schedule_from_config, schedule_problems
from training.resilience.ft_monitor import FtMonitor
from training.resilience.hooks import PhaseClock, ResilienceHooks
from training.resilience.inprocess import (
    RestartTracker,
    apply_process_env,
    build_wrapper,
    is_restart_abort,
    store_port,
    wrap,
)
from training.resilience.restarts import previous_start_ns, record_entry, restart_layer
from training.resilience.sigterm import TERMINATED_EXIT_CODE, Terminated
from training.telemetry.emf import EmfEmitter
from training.telemetry.events import LAYERS, EventLog, env_int

SUMMARY_FILE = "summary.json"
#: Written by rank 0 once a restore under ``--fresh`` completed: every later restart or launch ignores ``--fresh``.
FRESH_MARKER = "fresh_start.json"
#: The worker's start-up phases, each a ``phase`` event (``s``: its seconds): ``imports`` (process start -> the Wrapper
#: is built; ``start_ts`` is the process's start), ``wrapper`` (NVRx forks its monitor and meets the other ranks),
#: then on every entry ``process_group``, ``model`` (data, model, FSDP, optimizer), ``restore`` and ``first_step``.
PHASES = ("imports", "wrapper", "process_group", "model", "restore", "first_step")
#: Failures that fail the Job instead of restarting it.
FINAL_CAUSES = ("unrecoverable", "config", "no_usable_checkpoint", "checkpoint_root_missing")


class Runner:
    """The function the in-process Wrapper calls (once per iteration), or called once without it."""

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
        self.ledger = FailureLedger(self.run_dir, self.rank, cfg.faults.max_repeats)
        faults = schedule_from_config(cfg, args.faults, self.steps, self.world_size)
        self.injector = FaultInjector(faults, self.run_dir, self.rank, self.events, self.ledger, self.events.layer)
        self.monitor = FtMonitor(enabled=self.layers.ft_launcher, calculate_timeouts=cfg.ft.calculate_timeouts)
        self.hooks = ResilienceHooks(
            cfg,
            self.injector,
            self.monitor,
            inprocess=self.layers.inprocess,
            ft_launcher=self.layers.ft_launcher,
            events=self.events,
        )
        self.tracker = RestartTracker()
        self.entered_ns = previous_start_ns(self.run_dir, self.rank)
        self.clock = PhaseClock(self.events)
        self.last_step = 0
        self.completed = False  # the target step was reached (the exit code is 0 whatever teardown does)
        self.summary: dict[str, Any] | None = None
        self._store: Any = None
        self._wrapped = False

    def _default_layer(self) -> str:
        if self.layers.inprocess:
            return "inprocess"
        return "ft_launcher" if self.layers.ft_launcher else "job"

    def _restart_layer(self, iteration: int) -> tuple[str, str] | None:
        return restart_layer(self.layers, self.run_dir, self.entered_ns, iteration, self.tracker.cause)

    def __call__(self, call_wrapper: Any = None) -> int:
        from training.trainer import Trainer

        restart = self._enter(call_wrapper)
        self._init_process_group(self.events.iteration)
        self.clock.lap("process_group")
        trainer = Trainer(
            self.cfg,
            self.run_dir,
            self.events,
            checkpoint_mode=self.layers.checkpoint_mode,
            memory_tier=self.layers.memory_tier,
            target_steps=self.steps,
            hooks=self.hooks,
            allow_fresh_start=self._fresh_allowed(),
        )
        finished = False
        try:
            self._prepare(trainer, restart)
            final = trainer.train()
            with self.hooks.section("checkpoint"):  # the last write, as long as the checkpoint section allows
                trainer.ckpt.drain(*trainer.ckpt.keepalive)
            self.hooks.pings.release()  # the closing save and teardown are no steps
            self._complete(trainer, final)
            finished = True
            return final
        except Exception as err:
            self.last_step = max(self.last_step, getattr(trainer, "step", 0) or 0)
            cause = classify(err)
            # Injected faults were counted when they fired; a lost peer is the peer's fault, counted by its own rank.
            if getattr(err, "fault_kind", None) is None and cause != "peer_lost":
                self.ledger.record(cause, self.last_step)
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
        restart = self._restart_layer(iteration)
        entered_ns = time.time_ns()
        self.hooks.pings.bind(call_wrapper)
        if call_wrapper is not None:
            self.monitor.guard = call_wrapper.atomic
        # Connect to ft_launcher's rank monitor here, inside the in-process Wrapper (once per process): NVRx forks
        # its monitor daemon on entering the Wrapper, and a connection opened before that fork is inherited by
        # the daemon, which keeps it open after this worker has died.
        with self.monitor.guard():
            self.monitor.start()
        if restart:
            layer, cause = restart
            extra = {"detected_ts": self.tracker.detected_ts} if layer == "inprocess" else {}
            self.events.emit("restart_begin", cause=cause, layer=layer, emit_layer=layer, **extra)
            print(f"[train] rank {self.rank}: {layer} restart #{iteration or ''} after {cause}", flush=True)
            self.monitor.end_all_sections()
            # Re-entering is progress: without this heartbeat the rank monitor measured the in-process detection,
            # the re-initialisation and the restore against one step's heartbeat timeout (seen exceeding its 15 s on
            # 2 loaded cores, so ft_launcher killed a recovery that was under way).
            self.monitor.heartbeat(self.last_step)
            self.hooks.reset_step_timing()
        self.entered_ns = entered_ns
        if iteration > 0:  # a later process of this rank must not take a fault recovered here for its own cause
            record_entry(self.run_dir, self.rank, entered_ns)
        self.hooks.stall.progress()  # (re-)entering counts as progress: a stall from here on gets a stack dump
        self.ledger.check()
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
            self.hooks.keepalive,
            timeout_check.checkpoint_wait_s(self.cfg.ft.section_timeouts_s["checkpoint"]),
        )
        self.clock.lap("model", meta=trainer.on_meta)
        resumed = trainer.restore()
        self.clock.lap("restore")
        self.hooks.clock = self.clock  # the first heartbeat laps ``first_step``
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

    def _init_process_group(self, iteration: int) -> None:
        """The default group, on a store prefix of its own per in-process iteration, after every rank arrived.

        The launchers give each worker generation a fresh store hosted by global rank 0 (ft_launcher with c10d, and
        torchrun with ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` from the pod spec), so a generation never sees the
        keys of an earlier one. Re-initialising with ``env://`` on in-process re-entry reused the previous
        iteration's keys (seen hanging under ft_launcher), hence ``PrefixStore("train_iter<N>")``. The barrier first
        waits (up to ``inprocess.barrier_timeout_s``) until every rank arrived, so a slow starter is not mistaken for
        a lost peer by gloo's much shorter connect timeout (seen on 2 cores with 4 workers).
        """
        import datetime

        import torch.distributed as dist

        from training.parallel import distributed

        timeout_s = distributed.collective_timeout_s(self.cfg.inprocess)
        if iteration > 0 and dist.is_initialized():  # NVRx's abort normally destroyed it; never reuse a broken one
            print(f"[train] rank {self.rank}: process group of iteration {iteration - 1} still alive; aborting it")
            distributed.abort_process_group()
        agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        if self._store is None:
            self._store = dist.TCPStore(
                os.environ["MASTER_ADDR"],
                int(os.environ["MASTER_PORT"]),
                self.world_size,
                is_master=self.rank == 0 and not agent_store,
                timeout=datetime.timedelta(seconds=self.cfg.inprocess.barrier_timeout_s),
                multi_tenant=True,
                wait_for_workers=False,
            )
        # An agent's store outlives worker generations: name the generation by its restart count as well.
        prefix = (
            f"train_r{env_int('TORCHELASTIC_RESTART_COUNT')}_iter{iteration}"
            if agent_store
            else f"train_iter{iteration}"
        )
        store = dist.PrefixStore(prefix, self._store)
        distributed.store_barrier(store, self.world_size, self.cfg.inprocess.barrier_timeout_s)
        distributed.init_process_group(timeout_s=timeout_s, store=store, rank=self.rank, world_size=self.world_size)


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
        "measured_s": runner.hooks.measured,
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
    p.add_argument("--mode", type=one_of(modes), metavar="{" + ",".join(modes) + "}", help="default: cfg.job.mode")
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
    """``--faults``' entries that are malformed, or name a rank outside the launcher's world (``WORLD_SIZE``) or a
    step past ``--steps``. The schedule is checked again against the configuration once it is loaded
    (:func:`training.resilience.faults.schedule_from_config`)."""
    world = os.environ.get("WORLD_SIZE", "")
    steps = args.steps if good(args.steps) else None
    run = RunShape(steps, int(world) if world.isdigit() else None, world=f" (WORLD_SIZE {world})")
    return [f"--faults {line}" for line in schedule_problems(args.faults, run)]


def resolve_config(args: argparse.Namespace) -> tuple[ProjectConfig, RecoveryMode]:
    """The config (with local timeouts if ``--local``) and the recovery mode."""
    cfg = load_config(args.config, args.env)
    if args.short_timeouts:
        import torch

        port = cfg.local.inprocess_store_port
        inprocess, ft = cfg.local.timeouts(cuda=torch.cuda.is_available())
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


@dataclass
class Exit:
    """How a worker leaves: its exit code and cause; ``primary``: this rank's cause is the run's (not a consequence
    of another rank's fault); ``final``: fail the Job, ask ft_launcher not to restart."""

    code: int = 0
    cause: str = "completed"
    message: str = ""
    primary: bool = True
    final: bool = False


def exit_policy(err: BaseException | None, runner: Runner, unrecoverable: int) -> Exit:
    """The exit code of a worker whose training function ended with ``err`` (None: it returned)."""
    if err is None:
        return Exit()
    if isinstance(err, UnrecoverableError):
        cause = getattr(err, "cause", "unrecoverable")
        out = Exit(exit_code_for(cause, unrecoverable), cause, err.reason, final=True)
    elif isinstance(err, Terminated):
        out = Exit(TERMINATED_EXIT_CODE, "terminated", str(err), primary=False)
    elif is_restart_abort(err) or runner.tracker.abort_cause is not None:
        # NVRx's Wrapper may raise a teardown error of its own on top of the RestartAbort our initialize raised (its
        # store's host gone, say; the bytes initial rank that broke every node loss's teardown is fixed in
        # training.resilience.inprocess.fix_initial_ranks): the tracker knows the Wrapper ended because of that
        # abort. Ranks were lost (another pod's failure) or restarts came too fast: neither fails the Job here. The
        # lost peer's pod is replaced and this one rejoins; a rate budget hands the fault to the next layer.
        if runner.tracker.abort_cause == "peer_lost":
            cause = "peer_lost"
        else:
            cause = runner.tracker.cause if runner.tracker.cause not in (None, "peer_lost") else "exception"
        reason = runner.tracker.abort_reason
        if reason is None or is_restart_abort(err):
            message = f"in-process layer stopped: {reason or err}"
        else:  # the abort's reason, then what NVRx's teardown raised on top of it
            message = f"in-process layer stopped: {reason} (then, tearing down: {type(err).__name__}: {err})"
        # primary=False: usually a consequence of another rank leaving: keep that rank's cause
        out = Exit(exit_code_for(cause, unrecoverable), cause, message, primary=False)
    else:
        cause = classify(err)
        if runner.layers.ft_launcher or not isinstance(err, Exception):
            traceback.print_exception(err)
        out = Exit(exit_code_for(cause, unrecoverable), cause, f"{type(err).__name__}: {err}")
    out.final = out.final or out.cause in FINAL_CAUSES
    if out.code and runner.completed:
        # Training reached its target and its final state is saved: an error while tearing down (NVRx's Wrapper
        # talking to a store whose host, a pod that already finished, is gone; the launcher's SIGTERM as it leaves)
        # must not turn the success into a lost peer, which would send this pod back to a rendezvous nobody hosts.
        print(
            f"[train] rank {runner.rank}: completed; ignoring a teardown error ({out.cause}): {out.message}", flush=True
        )
        return Exit()
    return out


def setup(args: argparse.Namespace) -> Runner:
    """Config, process environment, signals, the static timeout checks and the eager imports; the Runner."""
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "error")
    cfg, mode = resolve_config(args)
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
        tracker=runner.tracker,
        log_dir=_monitor_log_dir(runner.run_dir),
        on_fault=[_abandon_async_saves],
    )
    wrap(wrapper, runner)()


def run(args: argparse.Namespace) -> int:
    """Train; returns the process exit code."""
    runner = setup(args)
    unrecoverable = runner.cfg.ft.unrecoverable_exit_code
    try:
        call(runner)
        out = exit_policy(None, runner, unrecoverable)
    except BaseException as err:
        out = exit_policy(err, runner, unrecoverable)
    if out.code:
        msg = f"[train] rank {runner.rank}: exiting with code {out.code} ({out.cause}): {out.message}"
        print(msg, file=sys.stderr, flush=True)
        keep = frozenset(fail_job_exit_codes(unrecoverable))
        try:
            write_exit_status(
                args.run_dir, out.code, out.cause, out.message[:2000], runner.rank, overwrite=out.primary,
                keep_codes=keep, final=out.final,
            )  # fmt: skip
        except OSError as err:  # the record is a courtesy to the supervisor; the exit code below still says it all
            print(f"[train] rank {runner.rank}: could not record the exit status: {err}", file=sys.stderr, flush=True)
        if out.final:
            runner.monitor.request_shutdown(f"{out.cause}: {out.message[:200]}")
    _finish(runner, out)
    return out.code


def _finish(runner: Runner, out: Exit) -> None:
    runner.hooks.stall.stop()
    runner.events.emit("exit", reason=out.cause, code=out.code, step=runner.last_step)
    if runner.emf.enabled and runner.summary is not None:  # rank 0 of a finished run: the run's goodput
        from training.telemetry.goodput import analyze, load_events

        run = analyze(load_events(runner.run_dir).events)
        runner.emf.goodput(training=run.training_goodput, infrastructure=run.infrastructure_goodput)
    runner.monitor.shutdown()
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
