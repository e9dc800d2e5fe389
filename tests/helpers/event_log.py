"""Event logs written in the order the trainer writes them, for the goodput unit tests.

The order follows ``training.local`` (``launch``), ``training.train.Runner`` (``restart_begin`` on re-entry, then
``start`` on every rank, rank 0's ``restore``, ``restart_end``), ``Trainer`` (rank 0's ``step``; ``ckpt_begin`` /
``ckpt_staged`` right after the step; an async save's ``ckpt_committed`` once its write is done), the fault
injector (``fault_injected`` by the faulting rank before the step it fires at) and ``run()`` (``exit``).
``tests/unit/training/telemetry/test_event_log.py`` checks it against a recorded real run
(``tests/golden/training/events_inprocess_ft.jsonl``).

Every method advances the clock by the ``dt`` it is given, so a test's expected numbers follow from its arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECORDED_RUN = Path(__file__).resolve().parents[1] / "golden" / "training" / "events_inprocess_ft.jsonl"


@dataclass
class TrainerLog:
    """One job of ``world`` ranks on ``host``; rank 0 writes the steps and checkpoints."""

    world: int = 2
    host: str = "node-0"
    hosts: tuple[str, ...] | None = None  # one per rank (a pod per rank); default: every rank on ``host``
    t: float = 1000.0
    mode: str = "inprocess-ft"
    layer: str = "inprocess"  # the workers' default layer (the innermost layer on)
    step_gap: float = 1.0  # seconds between step events
    step_s: float | None = 0.8  # the trainer's pure step time
    interval: int | None = None  # checkpoint every N steps
    ckpt_mode: str = "async"
    stall_s: float = 0.1  # staging (async) or write + commit (sync)
    write_s: float = 2.0  # async write, staged -> committed
    events: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0
    restart: int = 0
    attempt: int = 0
    iteration: int = 0
    _pids: dict[int, int] = field(default_factory=dict)
    _next_pid: int = 100
    _write_done: float = 0.0  # when the write in flight finishes

    def __post_init__(self) -> None:
        self.new_processes()
        self.t0 = self.t

    # ------------------------------------------------------------------ writing
    def emit(self, rank: int, event: str, *, layer: str | None = None, **fields: Any) -> dict[str, Any]:
        rec = {
            "ts": round(self.t, 6),
            "mono": round(self.t - self.t0, 6),
            "host": self.hosts[rank] if self.hosts and rank >= 0 else self.host,
            "pid": self._pids.get(rank, 1),
            "rank": rank,
            "iteration": self.iteration,
            "restart": self.restart,
            "attempt": self.attempt,
            "relaunch": 0,
            "layer": layer or (self.layer if rank >= 0 else "job"),
            "event": event,
            **fields,
        }
        self.events.append(rec)
        return rec

    def wait(self, dt: float) -> TrainerLog:
        self.t += dt
        return self

    def sorted_events(self) -> list[dict[str, Any]]:
        return sorted(self.events, key=lambda e: e["ts"])

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "events.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in self.sorted_events()))
        return path

    # ------------------------------------------------------------------ what the launcher and Runner write
    def launch(self, launcher: str = "ft_launcher") -> TrainerLog:
        self.emit(-1, "launch", launcher=launcher, nproc=self.world, mode=self.mode, attempt=self.attempt)
        return self

    def new_processes(self) -> None:
        """The launcher started a new worker per rank (new pids)."""
        for r in range(self.world):
            self._pids[r] = self._next_pid
            self._next_pid += 1

    def start(
        self,
        *,
        from_step: int = 0,
        restart: tuple[str, str] | None = None,
        detected_ts: float | None = None,
        dt_start: float = 0.0,
        dt_restore: float = 0.0,
    ) -> TrainerLog:
        """Every rank (re-)enters training: [restart_begin], start; ``dt_restore`` later rank 0's restore, then
        [restart_end]; ``restart`` = (layer, cause) for a recovery."""
        self.wait(dt_start)
        if restart:
            extra = {"detected_ts": detected_ts} if detected_ts is not None else {}
            for r in range(self.world):
                self.emit(r, "restart_begin", layer=restart[0], cause=restart[1], **extra)
        for r in range(self.world):
            self.emit(r, "start", world_size=self.world, mode=self.mode, device="cpu")
        self.wait(dt_restore)
        tier = "persistent" if from_step else "none"
        self.emit(0, "restore", from_step=from_step, tier=tier)
        if restart:
            for r in range(self.world):
                self.emit(r, "restart_end", layer=restart[0], resumed_step=from_step)
        self.step = from_step
        return self

    def inprocess_restart(self, cause: str, **kw: Any) -> TrainerLog:
        """NVRx re-entered the wrapped function in the same processes."""
        self.iteration += 1
        return self.start(restart=("inprocess", cause), **kw)

    def launcher_restart(self, cause: str, **kw: Any) -> TrainerLog:
        """ft_launcher started new workers (``TORCHELASTIC_RESTART_COUNT`` + 1)."""
        self.restart += 1
        self.iteration = 0
        self.new_processes()
        return self.start(restart=("ft_launcher", cause), **kw)

    # ------------------------------------------------------------------ what the Trainer writes
    def steps(self, last: int, *, final_checkpoint: bool = False) -> TrainerLog:
        """Rank 0's steps up to ``last``, one per ``step_gap``, with the checkpoints of ``interval``."""
        while self.step < last:
            self.wait(self.step_gap)
            self.step += 1
            fields = {"step": self.step, "loss": 1.0, "tokens": 512}
            if self.step_s is not None:
                fields["step_s"] = self.step_s
            self.emit(0, "step", **fields)
            due = self.interval and self.step % self.interval == 0
            if due or (final_checkpoint and self.step == last):
                self.save()
        return self

    def save(self) -> None:
        """``ckpt_begin`` after waiting for the previous write, ``ckpt_staged``, and (async) the commit later."""
        backpressure = max(0.0, self._write_done - self.t)
        self.emit(0, "ckpt_begin", step=self.step, mode=self.ckpt_mode, backpressure_s=round(backpressure, 6))
        self.wait(backpressure + self.stall_s)
        self.emit(0, "ckpt_staged", step=self.step, stall_s=round(backpressure + self.stall_s, 6))
        if self.ckpt_mode == "sync":
            self.emit(0, "ckpt_committed", step=self.step, write_s=self.stall_s, path=f"ckpt/{self.step}")
            return
        self._write_done = self.t + self.write_s
        now, self.t = self.t, self._write_done
        self.emit(0, "ckpt_committed", step=self.step, write_s=self.write_s, path=f"ckpt/{self.step}")
        self.t = now

    # ------------------------------------------------------------------ faults and exits
    def inject(self, kind: str, rank: int, *, dt: float = 0.0, phase: str = "step") -> TrainerLog:
        """The fault injector of ``rank`` fires before step ``step + 1``."""
        self.wait(dt)
        step = self.step + 1 if phase == "step" else self.step
        self.emit(rank, "fault_injected", kind=kind, step=step, fault_rank=rank, phase=phase)
        return self

    def exit(self, rank: int, code: int, reason: str, *, dt: float = 0.0) -> TrainerLog:
        self.wait(dt)
        self.emit(rank, "exit", reason=reason, code=code, step=self.step)
        return self

    def finish(self, *, dt: float = 0.0) -> TrainerLog:
        """The last write commits (the trainer's close waits for it), then every rank exits 0 (rank 1 first, as
        seen: rank 0 writes the summary)."""
        self.t = max(self.t, self._write_done)
        self.wait(dt)
        for r in reversed(range(self.world)):
            self.emit(r, "exit", reason="completed", code=0, step=self.step)
        return self

    def pid(self, rank: int) -> int:
        return self._pids[rank]


def recorded_run() -> list[dict[str, Any]]:
    """The recorded real run: ``python -m training.local --steps 40 --mode inprocess-ft --nproc 2 --faults
    exception@12:1,sigkill@27:1`` (checkpoints every 25 steps, async), on the 2-core machine."""
    return [json.loads(line) for line in RECORDED_RUN.read_text().splitlines() if line.strip()]


def recorded_run_replica(gap: float = 1.0) -> TrainerLog:
    """The recorded run's scenario, written by :class:`TrainerLog`."""
    log = TrainerLog(interval=25, step_gap=gap).launch()
    log.start(dt_start=5.0, dt_restore=0.2).steps(11)
    log.inject("exception", 1, dt=0.01).inprocess_restart("exception", dt_start=4.0, dt_restore=0.1).steps(26)
    log.inject("sigkill", 1, dt=0.01).exit(0, 143, "terminated", dt=0.6)
    log.launcher_restart("sigkill", from_step=25, dt_start=9.0, dt_restore=0.6).steps(40, final_checkpoint=True)
    return log.finish(dt=0.5)


def emf_records(events: list[dict[str, Any]], run_dir: Path, rank: int = 0) -> list[dict[str, Any]]:
    """The EMF records rank ``rank``'s emitter writes while the run writes ``events``: each event is appended to
    ``run_dir/events.jsonl`` first (the analysis reads the log so far), then handed to the emitter if ``rank``
    wrote it, with the emitter's clock at the event's time."""
    import io

    from platform_config import config_from_dict
    from training.telemetry.emf import EmfEmitter
    from training.telemetry.events import EventLog

    now = [0.0]
    buf = io.StringIO()
    cfg = config_from_dict({"observability": {"emf_metrics": True}})
    emf = EmfEmitter(cfg, stream=buf, endpoint="", clock=lambda: now[0])
    emf.follow(EventLog(run_dir, rank))
    with open(run_dir / "events.jsonl", "w") as f:
        for e in sorted(events, key=lambda e: e["ts"]):
            f.write(json.dumps(e) + "\n")
            f.flush()
            if e["rank"] == rank:
                now[0] = e["ts"]
                emf.on_event(e)
                emf.flush()
    return [json.loads(line) for line in buf.getvalue().splitlines()]
