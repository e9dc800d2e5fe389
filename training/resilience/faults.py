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

from training.common.files import atomic_write_json
from training.resilience.exit_codes import LEDGER_DIR, FailureLedger
from training.telemetry.events import EventLog

KINDS = ("exception", "hang", "sigkill", "oom", "comm")
PHASES = ("init", "step", "checkpoint", "restore", "eval")
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


def parse_schedule(spec: str) -> list[Fault]:
    """Parse ``kind@step[:rank][/phase][!]`` entries; raises ``ValueError`` naming the bad entry."""
    faults = []
    for raw in filter(None, (s.strip() for s in (spec or "").split(","))):
        item = raw
        sticky = item.endswith("!")
        item = item.removesuffix("!")
        phase = "step"
        if "/" in item:
            item, phase = item.split("/", 1)
        try:
            kind, rest = item.split("@", 1)
            step_s, _, rank_s = rest.partition(":")
            step, rank = int(step_s), int(rank_s or 0)
        except ValueError:
            raise ValueError(f"bad fault entry {raw!r}: expected kind@step[:rank][/phase][!]") from None
        if kind not in KINDS:
            raise ValueError(f"bad fault entry {raw!r}: kind must be one of {', '.join(KINDS)}")
        if phase not in PHASES:
            raise ValueError(f"bad fault entry {raw!r}: phase must be one of {', '.join(PHASES)}")
        if step < 0 or rank < 0:
            raise ValueError(f"bad fault entry {raw!r}: step and rank must be >= 0")
        faults.append(Fault(kind, step, rank, phase, sticky))
    return faults


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
    if steps < 2 or count > steps - 1:
        raise ValueError(f"cannot place {count} random faults in {steps} steps")
    rng = random.Random(seed)
    at = sorted(rng.sample(range(1, steps), count))
    chosen = rng.choices(kinds, weights=weights, k=count)
    return [Fault(kind, step, rng.randrange(world_size)) for kind, step in zip(chosen, at, strict=True)]


def schedule_from_config(cfg: Any, spec: str | None, steps: int, world_size: int) -> list[Fault]:
    """The run's schedule: ``spec`` (CLI) or ``cfg.faults.schedule``, plus ``cfg.faults.random``."""
    faults = parse_schedule(cfg.faults.schedule if spec is None else spec)
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
