"""Discrete-event simulation of one training job at segment granularity (never step by step).

A trial walks the job's timeline as segments: start-up, compute up to the next checkpoint boundary, back-pressure (a
save waits for the previous background write), stall, background write, down (detection + restart, by layer),
restore, and rework (compute that a fault threw away). Faults arrive as a Poisson process in the time the workers
are up (start-up, restarts and down time draw none) and from an optional fixed schedule (the step at which each
fires, once). Randomness is seeded per trial; fault arrivals and their classes have their own stream, so two
scenarios run with the same seed see the same faults (common random numbers for sweeps and mode comparisons).

Goodput is defined as ``training.telemetry.goodput`` defines it (``docs/goodput.md``): training goodput = the
kept steps' compute / wall time; infrastructure goodput = time the workers are in the training loop (from ``start``
to the next fault) / wall time. With ``record=True`` the trial also returns the coalesced event log a real run
would write (rank 0's view), so ``analyze()`` can check these numbers.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training.whatif.budgets import RestartBudgets
from training.whatif.params import LAYERS, FaultClass, Scenario

#: Waterfall components; the ``down_*`` ones are per recovery layer, plus a resubmitted job.
DOWN_KEYS = (*(f"down_{layer}" for layer in LAYERS), "down_resubmit")
WATERFALL_KEYS = ("productive", "stall", "back_pressure", "rework", "restore", *DOWN_KEYS, "startup")
#: Largest event log ``record=True`` will build (one line per step execution).
MAX_RECORDED_STEPS = 200_000
#: A trial gives up when its wall time passes this many times the run's compute (training goodput below 5%)
#: after at least GIVE_UP_MIN_FAULTS faults: without checkpoints, or with faults faster than the work between
#: them, a job may never finish.
GIVE_UP_FACTOR = 20.0
GIVE_UP_MIN_FAULTS = 20


@dataclass
class FaultRecord:
    """One simulated fault and how it was handled."""

    time_s: float
    kind: str
    step: int
    layer: str  # the layer that recovered it ("resubmit" when the job had to be resubmitted)
    layers_tried: list[str]
    detection_s: float
    down_s: float  # fault -> workers back in the loop
    restore_s: float
    rolled_back_to: int
    lost_s: float  # discarded compute, including the step in flight


@dataclass
class Trial:
    """One simulated job."""

    wall_s: float
    waterfall: dict[str, float]
    initial_startup_s: float
    faults: list[FaultRecord] = field(default_factory=list)
    saves: int = 0
    events: list[dict[str, Any]] | None = None
    finished: bool = True  # False: gave up at GIVE_UP_FACTOR x the compute; the figures are those so far

    @property
    def productive_s(self) -> float:
        return self.waterfall["productive"]

    @property
    def working_s(self) -> float:
        return self.wall_s - self.waterfall["startup"] - sum(self.waterfall[k] for k in DOWN_KEYS)

    @property
    def training_goodput(self) -> float:
        return self.productive_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def infrastructure_goodput(self) -> float:
        return self.working_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def reference_infrastructure_goodput(self) -> float:
        """The published experiment's definition: 1 - (fault -> training resumes, summed) / wall; the initial
        start-up is not down time there, a restart's start-up and restore are."""
        if self.wall_s <= 0:
            return 0.0
        w = self.waterfall
        down = sum(w[k] for k in DOWN_KEYS) + w["startup"] - self.initial_startup_s + w["restore"]
        return 1.0 - down / self.wall_s


def _cycle(sc: Scenario, step_s: float, write_s: float, sync: bool) -> tuple[float, float, float]:
    """One checkpoint cycle without faults: (stall, back-pressure wait, cycle length) in seconds."""
    stall = sc.stall_s + (write_s if sync else 0.0)
    wait = 0.0 if sync else max(0.0, write_s - sc.interval * step_s)
    return stall, wait, sc.interval * step_s + wait + stall


def _skippable_cycles(
    steps: int, k: int, done: int, cycle: float, to_fault_s: float, next_scheduled: int | None
) -> int:
    """Whole cycles of ``k`` steps from ``done`` that end before the target, the next scheduled fault's step and
    (one cycle short of) the next random fault."""
    n = (steps - done) // k
    if next_scheduled is not None:
        n = min(n, (next_scheduled - 1 - done) // k)
    if math.isfinite(to_fault_s):
        n = min(n, int(to_fault_s / cycle) - 1)
    return n


def _next_boundary(sc: Scenario, done: int) -> int:
    """The next step after ``done`` at which the loop saves (persistent or memory tier) or reaches the target."""
    return min([sc.steps, *((done // k + 1) * k for k in (sc.interval, sc.memory_every) if k)])


class _Interrupted(Exception):
    """A fault ended the current segment (already handled)."""


def _keeps_memory(sc: Scenario, fc: FaultClass, layer: str) -> bool:
    """Whether the memory tier's newest snapshot survives a fault recovered by ``layer``: in the process (in-process
    restart) or in /dev/shm (ft_launcher's new workers) unless the node is gone, and on a peer's node for any single
    pod or node lost when snapshots have peer copies; never when the job is resubmitted."""
    if sc.memory_peer_copies and sc.nodes > 1 and layer != "resubmit":
        return True
    return layer in ("inprocess", "ft_launcher") and not fc.needs_node


class _Sim:
    """The state of one trial; :meth:`run` walks it to the target step."""

    def __init__(self, sc: Scenario, seed: tuple[int, ...], *, record: bool, fast: bool) -> None:
        self.sc = sc
        arrivals, other = np.random.SeedSequence(list(seed)).spawn(2)
        self.rng_arrivals = np.random.default_rng(arrivals)
        self.rng = np.random.default_rng(other)
        self.step_s = sc.step_time
        self.sync = sc.ckpt_mode == "sync"
        self.write_s = sc.write_time
        self.restore = sc.restore_dist
        self.rates = sc.class_rates_per_s()
        self.rate = sum(self.rates)
        self.probs = [r / self.rate for r in self.rates] if self.rate > 0 else None
        self.class_index = {c.name: i for i, c in enumerate(sc.fault_classes)}
        self.schedule = sorted(sc.fault_schedule)  # pending (step, class); fired entries are removed
        self.fast = fast and not record
        self.events: list[dict[str, Any]] | None = [] if record else None
        self.t = 0.0
        self.done = 0  # steps in the current model state
        self.persist = 0  # newest committed persistent checkpoint
        self.memory = 0  # newest memory-tier copy (0 = none)
        self.write: tuple[float, int, float] | None = None  # async write in flight: (end, step, begin)
        self.first_save = True  # the next save is the first of this process
        self.after_save = False  # the state right after a persistent save (the fast-forward may start here)
        self.budgets = RestartBudgets(sc)
        self.next_fault = math.inf
        self.wf = dict.fromkeys(WATERFALL_KEYS, 0.0)
        self.faults: list[FaultRecord] = []
        self.saves = 0
        self.pending: tuple[float, str, int, FaultRecord] | None = None  # a restart to start: startup, layer, ...
        self.give_up_at = GIVE_UP_FACTOR * sc.steps * self.step_s + sc.startup

    # ------------------------------------------------------------------ driver
    def run(self) -> Trial:
        sc = self.sc
        gpus = sc.nodes * sc.gpus_per_node
        self._emit(0.0, "launch", rank=-1, layer="job", launcher="whatif", nproc=gpus, mode=sc.mode)
        initial = sc.startup
        self._start(initial, layer=None, restore_from=0)
        finished = True
        while True:
            try:
                if self.t >= self.give_up_at and len(self.faults) >= GIVE_UP_MIN_FAULTS:
                    finished = False
                    break
                if self.pending is not None:  # new workers after a fault: start-up, start, restore
                    startup, layer, restore_from, record = self.pending
                    self.pending = None
                    from_memory = restore_from > self.persist
                    record.restore_s = self._start(
                        startup, layer=layer, restore_from=restore_from, from_memory=from_memory
                    )
                if self.done >= sc.steps:
                    if self.write is not None:  # close(): wait for the last background write
                        self._busy(self.write[0] - self.t, "back_pressure")
                        self._commit_due(self.t)
                    break
                if self.fast and self.after_save:
                    self._fast_forward()
                    if self.done >= sc.steps:
                        continue
                boundary = _next_boundary(sc, self.done)
                self._compute_to(boundary)
                if sc.interval and boundary % sc.interval == 0:
                    self._persistent_save(boundary)
                elif sc.memory_every and boundary % sc.memory_every == 0:
                    self._busy(sc.memory_stall_s, "stall")
                    self.memory = boundary
            except _Interrupted:
                continue
        self._emit(self.t, "exit", reason="done" if finished else "gave_up", code=0 if finished else 1, step=self.done)
        self.wf["productive"] = self.done * self.step_s  # the kept steps: all of them unless the trial gave up
        if self.events is not None:
            self.events.sort(key=lambda e: e["ts"])  # stable: equal times keep the order they happened in
        return Trial(self.t, dict(self.wf), initial, self.faults, self.saves, self.events, finished)

    # ------------------------------------------------------------------ segments
    def _compute_to(self, boundary: int) -> None:
        """Run steps done+1 .. boundary; a fault on the way interrupts."""
        n = boundary - self.done
        end = self.t + n * self.step_s
        k_sched = None
        if self.schedule and self.schedule[0][0] <= boundary:
            k_sched = self.schedule[0][0] - self.done - 1  # it fires at the start of its step
        t_sched = self.t + k_sched * self.step_s if k_sched is not None else math.inf
        if min(self.next_fault, t_sched) < end:
            if t_sched <= self.next_fault:
                assert k_sched is not None
                k, tf, cls = k_sched, t_sched, self.class_index[self.schedule.pop(0)[1]]
            else:
                tf, cls = self.next_fault, None
                k = min(int((tf - self.t) / self.step_s), n - 1)
            self._steps(k)
            self._commit_due(tf)
            partial = tf - self.t
            self.t = tf
            self._fault(cls, step=self.done + 1, partial=partial)
        self._steps(n)
        self._commit_due(self.t)
        self.after_save = False

    def _steps(self, k: int) -> None:
        if self.events is not None:
            for i in range(1, k + 1):
                self._emit(self.t + i * self.step_s, "step", step=self.done + i, loss=0.0, tokens=0, step_s=self.step_s)
        self.t += k * self.step_s
        self.done += k

    def _busy(self, duration: float, bucket: str, *, fault_step: int | None = None) -> None:
        """Working time that is not compute (stall, back-pressure, restore); a fault on the way interrupts."""
        end = self.t + duration
        if self.next_fault < end:
            tf = self.next_fault
            self._commit_due(tf)
            self.wf[bucket] += tf - self.t
            self.t = tf
            self._fault(None, step=self.done if fault_step is None else fault_step, partial=0.0)
        self._commit_due(end)
        self.wf[bucket] += duration
        self.t = end

    def _persistent_save(self, step: int) -> None:
        sc = self.sc
        if self.write is not None:  # back-pressure: one write in flight at most
            self._busy(self.write[0] - self.t, "back_pressure")
            self._commit_due(self.t)
        stall = (sc.first_stall_s if self.first_save and sc.first_stall_s is not None else sc.stall_s) + (
            self.write_s if self.sync else 0.0
        )
        begin = self.t
        self._emit(begin, "ckpt_begin", step=step, mode=sc.ckpt_mode)
        self._busy(stall, "stall")
        self.first_save = False
        self.saves += 1
        self._emit(self.t, "ckpt_staged", step=step, stall_s=stall)
        if self.sync:
            self.persist = step
            self._emit(self.t, "ckpt_committed", step=step, write_s=stall, path=f"step_{step}")
        else:
            self.write = (self.t + self.write_s, step, begin)
            self._commit_due(self.t)
        self.after_save = True

    def _commit_due(self, now: float) -> None:
        if self.write is not None and self.write[0] <= now:
            end, step, begin = self.write
            self.persist = max(self.persist, step)
            self.write = None
            self._emit(end, "ckpt_committed", step=step, write_s=end - begin, path=f"step_{step}")

    def _fast_forward(self) -> None:
        """Jump over whole checkpoint cycles that no fault can reach (same result as walking them one by one)."""
        sc = self.sc
        if sc.memory_every or not sc.interval or self.t >= self.next_fault:
            return
        k = sc.interval
        stall, wait, cycle = _cycle(sc, self.step_s, self.write_s, self.sync)
        next_scheduled = self.schedule[0][0] if self.schedule else None
        n = _skippable_cycles(sc.steps, k, self.done, cycle, self.next_fault - self.t, next_scheduled)
        if n <= 0:
            return
        if not self.sync:
            assert self.write is not None or self.write_s == 0.0
            self.write = (self.t + n * cycle + self.write_s, self.done + n * k, self.t + n * cycle - stall)
            self.persist = self.done + (n - 1) * k
            self._commit_due(self.t + n * cycle)
        else:
            self.persist = self.done + n * k
        self.t += n * cycle
        self.done += n * k
        self.wf["stall"] += n * stall
        self.wf["back_pressure"] += n * wait
        self.saves += n

    # ------------------------------------------------------------------ faults and recovery
    def _fault(self, cls: int | None, *, step: int, partial: float) -> None:
        """Handle a fault at ``self.t``: detect and restart (escalating), leave the new workers' start and restore
        to the driver (:attr:`pending`), and raise :class:`_Interrupted`."""
        sc, tf = self.sc, self.t
        if cls is None:
            cls = int(self.rng_arrivals.choice(len(self.rates), p=self.probs))  # same faults across scenarios
        fc = sc.fault_classes[cls]
        node = int(self.rng_arrivals.integers(sc.nodes))  # the node it hits
        self._emit(tf, "fault_injected", kind=fc.name, step=step, fault_rank=0, phase="step")
        self.write = None  # an in-flight save is abandoned
        chain = [x for x in LAYERS if x in sc.layers_on and x in fc.detection_s]
        usable = [x for x in chain if self.budgets.left(x, node, ignored=fc.node_loss)]
        layer = usable[0] if usable else "resubmit"
        detection = fc.detection_s.get(layer if layer != "resubmit" else "job", 0.0)
        self.t = tf + detection
        tried = []
        while True:
            tried.append(layer)
            self._emit(self.t, "restart_begin", cause=fc.name, layer="job" if layer == "resubmit" else layer)
            if layer == "resubmit":
                self.t += sc.resubmit_s
                break
            self.t += sc.layers[layer].restart.sample(self.rng)
            rest = usable[usable.index(layer) + 1 :]
            if rest and sc.layers[layer].fail_p and self.rng.random() < sc.layers[layer].fail_p:
                self.budgets.failed_attempt(layer)
                layer = rest[0]  # the attempt failed: the next layer takes over at once
                continue
            break
        if fc.needs_node:
            self.t += self.budgets.replacement_wait(tf)
        down_until = self.t
        self.budgets.charge(layer, node, node_loss=fc.node_loss)
        if not _keeps_memory(sc, fc, layer):
            self.memory = 0
        restore_from = max(self.persist, self.memory)
        lost = (self.done - restore_from) * self.step_s + partial
        self.wf["rework"] += lost
        self.wf[f"down_{layer}"] += down_until - tf
        startup = sc.startup if layer in ("job", "resubmit") else 0.0
        if self.budgets.bump_generation(layer):
            self.first_save = True
        self.done = restore_from
        record = FaultRecord(
            tf, fc.name, step, layer, tried, detection, down_until + startup - tf, 0.0, restore_from, lost
        )
        self.faults.append(record)
        self.pending = (startup, layer, restore_from, record)
        raise _Interrupted

    def _start(self, startup: float, *, layer: str | None, restore_from: int, from_memory: bool = False) -> float:
        """Start-up (new pods), then ``start``, the restore and ``restart_end``; the fault clock runs from ``start``."""
        self.wf["startup"] += startup
        self.t += startup
        self._emit(self.t, "start", world_size=self.sc.nodes * self.sc.gpus_per_node, mode=self.sc.mode, device="sim")
        self.next_fault = self.t + self.rng_arrivals.exponential(1.0 / self.rate) if self.rate > 0 else math.inf
        self.write = None
        self.after_save = False
        restore_s = 0.0
        if restore_from > 0:
            restore_s = self.sc.memory_restore_s if from_memory else self.restore.sample(self.rng)
        self._busy(restore_s, "restore", fault_step=restore_from + 1)
        tier = "none" if restore_from == 0 else ("memory" if from_memory else "persistent")
        self._emit(self.t, "restore", from_step=restore_from, tier=tier)
        if layer is not None:
            self._emit(self.t, "restart_end", layer="job" if layer == "resubmit" else layer)
        return restore_s

    def _emit(self, ts: float, event: str, *, rank: int = 0, layer: str = "job", **fields: Any) -> None:
        if self.events is not None:
            record = {"ts": ts, "mono": ts, "rank": rank, **self.budgets.gen, "layer": layer, "event": event}
            self.events.append(record | fields)


def simulate(sc: Scenario, trial: int = 0, *, record: bool = False, fast: bool = True) -> Trial:
    """Run trial number ``trial`` of ``sc`` (seeded by ``sc.seed`` and ``trial``).

    ``record`` builds the coalesced event log (refused above :data:`MAX_RECORDED_STEPS` steps); ``fast`` jumps
    over fault-free checkpoint cycles in closed form (the result is the same; ``record`` turns it off).
    """
    if record and sc.steps > MAX_RECORDED_STEPS:
        raise ValueError(
            f"--events: the event log has one line per step; {sc.steps} steps is above {MAX_RECORDED_STEPS}"
        )
    return _Sim(sc, (sc.seed, trial), record=record, fast=fast).run()


@dataclass(frozen=True)
class Summary:
    """Percentiles over the trials of one scenario."""

    trials: list[Trial]
    nodes: int
    gpus_per_node: int

    def _values(self, name: str) -> list[float]:
        return [getattr(t, name) for t in self.trials]

    def stats(self, values: list[float]) -> dict[str, float]:
        a = np.asarray(values, dtype=float)
        return {
            "p5": float(np.percentile(a, 5)),
            "p50": float(np.percentile(a, 50)),
            "p95": float(np.percentile(a, 95)),
            "mean": float(a.mean()),
        }

    @property
    def training_goodput(self) -> dict[str, float]:
        return self.stats(self._values("training_goodput"))

    @property
    def infrastructure_goodput(self) -> dict[str, float]:
        return self.stats(self._values("infrastructure_goodput"))

    @property
    def time_to_target_s(self) -> dict[str, float]:
        return self.stats(self._values("wall_s"))

    @property
    def lost_gpu_hours(self) -> dict[str, float]:
        gpus = self.nodes * self.gpus_per_node
        return self.stats([(t.wall_s - t.productive_s) * gpus / 3600 for t in self.trials])

    @property
    def faults(self) -> dict[str, float]:
        return self.stats([len(t.faults) for t in self.trials])

    @property
    def waterfall_s(self) -> dict[str, float]:
        """Mean seconds per component; they sum to the mean wall time."""
        return {k: float(np.mean([t.waterfall[k] for t in self.trials])) for k in WATERFALL_KEYS}

    @property
    def unfinished(self) -> int:
        """Trials that gave up (see :data:`GIVE_UP_FACTOR`)."""
        return sum(not t.finished for t in self.trials)

    def recovered_by(self) -> dict[str, int]:
        return dict(sorted(Counter(f.layer for t in self.trials for f in t.faults).items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "training_goodput": self.training_goodput,
            "infrastructure_goodput": self.infrastructure_goodput,
            "reference_infrastructure_goodput": self.stats(self._values("reference_infrastructure_goodput")),
            "time_to_target_s": self.time_to_target_s,
            "lost_gpu_hours": self.lost_gpu_hours,
            "faults_per_run": self.faults,
            "recovered_by": self.recovered_by(),
            "unfinished_trials": self.unfinished,
            "waterfall_s": self.waterfall_s,
        }


def run_trials(sc: Scenario, trials: int | None = None) -> Summary:
    """``trials`` (default ``sc.trials``) independent trials of ``sc``."""
    n = sc.trials if trials is None else trials
    return Summary([simulate(sc, i) for i in range(n)], sc.nodes, sc.gpus_per_node)
