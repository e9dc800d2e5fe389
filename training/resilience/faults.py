"""Fault injection: schedules, persisted fired-state, and the faults themselves.

Schedule syntax (comma separated): ``kind@step[:rank][/phase][!]``

- ``kind``: ``exception`` | ``hang`` | ``sigkill`` | ``oom`` | ``comm``
- ``step``: the fault fires at the first fault point of its phase whose step is ``>= step``
- ``rank``: global rank that fails (default 0)
- ``phase``: ``init`` | ``step`` (default) | ``checkpoint`` (while an async save is in flight) | ``restore`` | ``eval``
- ``!``: sticky, fires again after every recovery (a deterministic bug; used to test escalation)

What each kind does, and which layer is meant to recover it (see docs/recovery-layers.md):

- ``exception``: raises :class:`InjectedFault` -> in-process restart (all ranks re-enter the Wrapper).
- ``comm``: breaks this rank's process group (NCCL: aborts its communicators; gloo: destroys the group) and
  raises; the peers' next collective fails -> in-process restart.
- ``hang``: spins in Python (sleeping 50 ms at a time) without progress or heartbeats -> the Wrapper's
  soft timeout (peers blocked in the collective) aborts and restarts in-process; without the in-process
  layer the ft_launcher heartbeat / section timeout kills and restarts the workers.
- ``oom``: a real allocation failure (a tensor far larger than the machine's memory; on CUDA
  ``torch.cuda.OutOfMemoryError``) -> in-process restart. The kernel OOM killer's SIGKILL is the
  ``sigkill`` kind.
- ``sigkill``: ``kill -9`` of this worker -> ft_launcher restarts the whole worker group in the job
  (the survivors are stopped by the launcher; the world size stays the same).

The fired-state (``<run_dir>/faults/fired.rank<R>.json``) is written atomically *before* a fault fires,
and the ``fault_injected`` event too, so that after recovery a fault never fires again.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.common.arguments import problem
from training.common.files import atomic_write_json
from training.resilience.exit_codes import LEDGER_DIR, FailureLedger
from training.telemetry.events import EventLog

KINDS = ("exception", "hang", "sigkill", "oom", "comm")
PHASES = ("init", "step", "checkpoint", "restore", "eval")
#: What a fault's step may not go past (in the messages of :func:`schedule_problems`).
LAST_STEP = "the run's last step"
#: A hang that nothing detects ends after this long (so a misconfigured test cannot run forever).
HANG_LIMIT_S = 3600.0


class InjectedFault(RuntimeError):
    """An injected fault (kinds exception, comm; oom re-raises the real allocation error)."""

    def __init__(self, kind: str, step: int, rank: int, detail: str = "") -> None:
        super().__init__(f"injected {kind} fault at step {step} on rank {rank}{': ' + detail if detail else ''}")
        self.fault_kind = kind
        self.step = step
        self.rank = rank
        self.detail = detail

    def __reduce__(self) -> tuple[Any, ...]:  # NVRx deep-copies the exception into its frozen state
        return (type(self), (self.fault_kind, self.step, self.rank, self.detail))


@dataclass(frozen=True)
class Fault:
    """One scheduled fault."""

    kind: str
    step: int
    rank: int = 0
    phase: str = "step"
    sticky: bool = False

    @property
    def key(self) -> str:
        return f"{self.kind}@{self.step}:{self.rank}/{self.phase}"

    def __str__(self) -> str:
        return self.key + ("!" if self.sticky else "")


@dataclass(frozen=True)
class RunShape:
    """What a schedule is checked against: the run's target step, its workers (``world`` says where the count comes
    from, e.g. ``" (--nproc 2)"``) and its evaluation interval; None: not checked."""

    steps: int | None
    world_size: int | None
    eval_interval: int | None = None
    world: str = ""


def _entry(raw: str) -> Fault | list[str]:
    """One ``kind@step[:rank][/phase][!]`` entry, or a line per bad part of it."""
    item = raw.removesuffix("!")
    item, _, phase = item.partition("/") if "/" in item else (item, "", "step")
    kind, at, rest = item.partition("@")
    if not at:
        return [problem(repr(raw), "expected kind@step[:rank][/phase][!]", raw)]
    step_s, colon, rank_s = rest.partition(":")
    bad = [] if kind in KINDS else [problem(repr(raw), f"kind must be one of {', '.join(KINDS)}", kind)]
    if not step_s.isdigit():
        bad.append(problem(repr(raw), "step must be a whole number >= 0", step_s))
    if colon and not rank_s.isdigit():
        bad.append(problem(repr(raw), "rank must be a whole number >= 0", rank_s))
    if phase not in PHASES:
        bad.append(problem(repr(raw), f"phase must be one of {', '.join(PHASES)}", phase))
    return bad or Fault(kind, int(step_s), int(rank_s or 0), phase, raw.endswith("!"))


def _entries(spec: str | None) -> list[str]:
    return list(filter(None, (s.strip() for s in (spec or "").split(","))))


def _outside_the_run(raw: str, fault: Fault, run: RunShape) -> list[str]:
    """Why ``fault`` would never fire in ``run`` (a line each), if it would not."""
    bad = []
    if run.world_size is not None and fault.rank >= run.world_size:
        allowed = f"rank must be below {run.world_size}, the run's workers{run.world}"
        bad.append(problem(repr(raw), allowed, fault.rank))
    if run.steps is None:
        return bad
    last, what = run.steps, LAST_STEP
    if fault.phase == "init":
        last, what = 0, "an init fault fires at start-up, step 0"
    elif fault.phase == "eval" and run.eval_interval is not None:
        every = run.eval_interval
        last = run.steps - run.steps % every if every else 0
        what = f"the run's last evaluation (train.eval_interval {every})"
        if last == 0:
            never = f"an eval fault never fires: no evaluation in {run.steps} steps (train.eval_interval {every})"
            return [*bad, f"{raw!r}: {never}"]
    if fault.step > last:
        bad.append(problem(repr(raw), f"step must be at most {last}: {what}", fault.step))
    return bad


def schedule_problems(spec: str | None, run: RunShape | None = None) -> list[str]:
    """A line per problem of the schedule ``spec`` (``'ENTRY': what is allowed (got VALUE)``): its syntax, kind and
    phase, and with ``run`` a rank outside its world or a step it never reaches (a fault that would never fire)."""
    lines: list[str] = []
    for raw in _entries(spec):
        parsed = _entry(raw)
        if isinstance(parsed, Fault):
            lines += _outside_the_run(raw, parsed, run) if run is not None else []
        else:
            lines += parsed
    return lines


def random_problems(count: int, steps: int) -> list[str]:
    """Why ``count`` random faults (``faults.random.count``) cannot be placed in a run of ``steps`` steps, if not."""
    if count and (steps < 2 or count > steps - 1):
        fits = max(steps - 1, 0)
        return [problem("faults.random.count", f"at most {fits} random fault(s) fit in a run of {steps} steps", count)]
    return []


def parse_schedule(spec: str, run: RunShape | None = None) -> list[Fault]:
    """Parse ``kind@step[:rank][/phase][!]`` entries (checked against ``run`` if given); raises ``ValueError`` naming
    every bad entry."""
    bad = schedule_problems(spec, run)
    if bad:
        raise ValueError("; ".join(f"bad fault entry {line}" for line in bad))
    return [f for f in map(_entry, _entries(spec)) if isinstance(f, Fault)]


def random_schedule(
    count: int,
    kinds: list[str],
    weights: list[float] | None,
    seed: int,
    steps: int,
    world_size: int,
) -> list[Fault]:
    """``count`` faults at distinct steps in ``[1, steps - 1]`` on random ranks; deterministic given ``seed``."""
    if count == 0:
        return []
    for line in random_problems(count, steps):
        raise ValueError(line)
    rng = random.Random(seed)
    at = sorted(rng.sample(range(1, steps), count))
    chosen = rng.choices(kinds, weights=weights, k=count)
    return [Fault(kind, step, rng.randrange(world_size)) for kind, step in zip(chosen, at, strict=True)]


def schedule_from_config(cfg: Any, spec: str | None, steps: int, world_size: int) -> list[Fault]:
    """The run's schedule: ``spec`` (CLI) or ``cfg.faults.schedule``, plus ``cfg.faults.random``; raises
    ``ValueError`` naming every entry that is malformed or would never fire in this run."""
    run = RunShape(steps, world_size, cfg.train.eval_interval, f" (WORLD_SIZE {world_size})")
    faults = parse_schedule(cfg.faults.schedule if spec is None else spec, run)
    r = cfg.faults.random
    faults += random_schedule(r.count, list(r.kinds), r.weights, r.seed, steps, world_size)
    return faults


def allocate_beyond_memory() -> None:
    """Make a real allocation that cannot succeed (raises the allocator's own out-of-memory error)."""
    import torch

    if torch.cuda.is_available():
        _free, total = torch.cuda.mem_get_info()
        torch.empty(int(total) * 4, dtype=torch.uint8, device="cuda")
    else:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        torch.empty(int(pages) * 1024, dtype=torch.uint8)  # far above RAM + swap: malloc fails at once
    raise RuntimeError("allocation beyond memory unexpectedly succeeded")


class FaultInjector:
    """Fires scheduled faults at the Trainer's fault points; implements ``TrainerHooks.fault_point``.

    Also a ``Stateful`` (``state_dict``/``load_state_dict``) so that the fired-state travels with each
    checkpoint. Loading merges (never un-fires): the JSON file stays the source of truth.
    """

    def __init__(
        self,
        faults: list[Fault],
        run_dir: Path,
        rank: int,
        events: EventLog,
        ledger: FailureLedger | None = None,
        layer: str = "job",
    ) -> None:
        self.faults = [f for f in faults if f.rank == rank]
        self.all_faults = list(faults)
        self.rank = rank
        self.events = events
        self.layer = layer
        self.path = Path(run_dir) / LEDGER_DIR / f"fired.rank{rank}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ledger = ledger
        self.fired: dict[str, int] = self._read()

    def _read(self) -> dict[str, int]:
        try:
            return {str(k): int(v) for k, v in json.loads(self.path.read_text()).items()}
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def _due(self, phase: str, step: int) -> Fault | None:
        for f in self.faults:
            if f.phase == phase and step >= f.step and (f.sticky or f.key not in self.fired):
                return f
        return None

    @property
    def last_kind(self) -> str | None:
        """Kind of the most recently fired fault of this rank (the restart cause), if any."""
        data = self._read()
        if not data:
            return None
        key = max(data, key=lambda k: data[k])
        return key.split("@", 1)[0]

    def fault_point(self, phase: str, step: int) -> None:
        """Fire the due fault of ``phase`` at ``step``, if any (persist, emit, then fire)."""
        fault = self._due(phase, step)
        if fault is None:
            return
        self.fired = self._read()
        self.fired[fault.key] = time.time_ns()
        atomic_write_json(self.path, self.fired)
        if self.ledger is not None:
            self.ledger.record(fault.kind, fault.step, fault.phase)
        self.events.emit(
            "fault_injected",
            kind=fault.kind,
            step=step,
            fault_rank=self.rank,
            phase=phase,
            scheduled=str(fault),
            emit_layer=self.layer,
        )
        print(f"[faults] rank {self.rank}: injecting {fault} at {phase} of step {step}", flush=True)
        fire(fault.kind, step, self.rank)

    def fired_count(self) -> int:
        return len(self._read())

    # Stateful
    def state_dict(self) -> dict[str, Any]:
        return {f"rank{self.rank}": json.dumps(self._read(), sort_keys=True)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raw = state.get(f"rank{self.rank}")
        if not raw:
            return
        merged = {**json.loads(raw), **self._read()}
        if merged != self._read():
            atomic_write_json(self.path, merged)
        self.fired = merged


def fire(kind: str, step: int, rank: int) -> None:
    """Inject one fault of ``kind`` now."""
    if kind == "exception":
        raise InjectedFault(kind, step, rank)
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # not reached
    if kind == "hang":
        deadline = time.monotonic() + HANG_LIMIT_S
        while time.monotonic() < deadline:
            time.sleep(0.05)
        raise InjectedFault(kind, step, rank, f"hang not detected within {HANG_LIMIT_S:.0f} s")
    if kind == "oom":
        try:
            allocate_beyond_memory()
        except RuntimeError as err:  # torch.cuda.OutOfMemoryError is a RuntimeError too
            raise InjectedFault(kind, step, rank, f"{type(err).__name__}: {str(err).splitlines()[0]}") from err
    if kind == "comm":
        from training.parallel import distributed

        with contextlib.suppress(Exception):
            # NCCL: a broken link, the communicators die and the group object stays; gloo has no abort, so
            # closing the group's connections is what peers see.
            if not distributed.abort_communicators():
                distributed.destroy_process_group()
        raise InjectedFault(kind, step, rank, "process group broken; peers' collectives fail")
    raise ValueError(f"unknown fault kind {kind!r}")


def fired_faults(run_dir: Path) -> Iterator[tuple[int, str]]:
    """All (rank, fault key) pairs that fired in a run."""
    for path in sorted((Path(run_dir) / LEDGER_DIR).glob("fired.rank*.json")):
        rank = int(path.stem.removeprefix("fired.rank"))
        with contextlib.suppress(json.JSONDecodeError):
            for key in json.loads(path.read_text()):
                yield rank, key
