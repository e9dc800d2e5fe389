"""The planner's inputs: one :class:`Scenario` (run, checkpoints, storage, restore, start-up, faults, recovery layers).

Every field has a documented default; :meth:`Scenario.validate` names the field and what is allowed. Durations are
seconds, rates are per hour. Defaults that are not plain choices come from public figures, named where they are set:

* per-layer recovery: the AWS/NVIDIA p5 experiment (Llama 3.1 8B, 16 H100): in-process ~10 s, ft_launcher ~17 s,
  Kubernetes pod restart ~270 s per fault;
* node MTBF and the fault mix: Meta's Llama 3 paper (arXiv 2407.21783, Table 5: 419 unexpected interruptions in 54
  days on 16,384 H100 = 2,048 nodes), see :data:`LLAMA3_NODE_MTBF_HOURS` and :func:`default_fault_classes`;
* restart budgets and timeouts: ``platform_config``'s defaults (``inprocess.max_iterations``, ``ft.max_restarts``,
  ``job.backoff_limit``, ``inprocess.soft_timeout_s``, ``ft.rank_heartbeat_timeout_s``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from platform_config import MODE_LAYERS, ProjectConfig, RecoveryMode
from platform_config.schema import LLAMA3_NODE_MTBF_HOURS as LLAMA3_NODE_MTBF_HOURS

#: Recovery layers, lowest first (the names the trainer's events use).
LAYERS = ("inprocess", "ft_launcher", "job")
CHECKPOINT_MODES = ("async", "sync")
#: z of the 95th percentile of a standard normal: a lognormal through p50 and p95 has sigma = ln(p95/p50) / Z95.
Z95 = 1.6448536269514722
#: torch's default NCCL watchdog timeout: the only hang detector when no NVRx layer runs.
NCCL_WATCHDOG_S = 600.0
#: Kubernetes marks an unreachable node NotReady after node-monitor-grace-period: 50 s by default in current
#: releases, 40 s in older ones (kubernetes/kubernetes#127352).
NOT_READY_S = 50.0
#: A lost node -> its pod deleted (the index may be replaced), on EKS's timeline with this project's fencing (a
#: stale Lease or NotReady, the out-of-service taint, PodGC's next 20 s pass): 41.5, 44.3, 44.7 and 58.2 s in the four
#: runs of docs/benchmarks.md ("Node loss on the EKS timeline"), mean 47.2 s. Without fencing a terminated
#: instance's pod goes at the PodGC pass 40 s after its Node's deletion (about 90-110 s), a hung one's never.
EKS_EVICTION_S = 47.2


class ScenarioError(ValueError):
    """An input the planner cannot use; the message names the field (flag) and what is allowed."""


@dataclass(frozen=True)
class Dist:
    """A non-negative duration: a lognormal through ``p50`` and ``p95``; a constant when ``p95`` is None or equal."""

    p50: float
    p95: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.p50) and self.p50 >= 0):
            raise ScenarioError(f"p50 must be a finite number >= 0 (got {self.p50})")
        if self.p95 is not None and not (math.isfinite(self.p95) and self.p95 >= self.p50):
            raise ScenarioError(f"p95 must be >= p50 = {self.p50} (got {self.p95})")

    @property
    def sigma(self) -> float:
        if self.p95 is None or self.p50 == 0 or self.p95 == self.p50:
            return 0.0
        return math.log(self.p95 / self.p50) / Z95

    def sample(self, rng: np.random.Generator) -> float:
        s = self.sigma
        return self.p50 if s == 0 else float(self.p50 * math.exp(s * rng.standard_normal()))

    @property
    def mean(self) -> float:
        return self.p50 * math.exp(self.sigma**2 / 2)

    def to_json(self) -> dict[str, float | None]:
        return {"p50": self.p50, "p95": self.p95 if self.p95 is not None else self.p50}

    @classmethod
    def of(cls, value: Any, name: str) -> Dist:
        """A number (constant), ``{p50, p95}`` or a Dist; ``name`` is the field for the error."""
        if isinstance(value, Dist):
            return value
        try:
            if isinstance(value, dict):
                unknown = set(value) - {"p50", "p95"}
                if unknown or "p50" not in value:
                    raise ScenarioError(f"needs keys p50 and optionally p95 (got {sorted(value)})")
                p95 = value.get("p95")
                return cls(float(value["p50"]), None if p95 is None else float(p95))
            return cls(float(value))
        except (TypeError, ValueError) as exc:
            raise ScenarioError(f"{name}: {exc}") from None


@dataclass(frozen=True)
class FaultClass:
    """A kind of failure: how often it happens and which layers can notice and recover it.

    ``rate_per_hour`` is per node (``per='node'``) or per GPU; when None, ``share`` x (1 / node MTBF) per node.
    ``detection_s[layer]`` is how long that layer takes to notice it; a layer missing from the map cannot recover it.
    ``node_loss`` faults also wait for a replacement node (or take a spare), and the Job does not count them
    (``DisruptionTarget``). ``ready_node`` faults (a GPU fault on a node that stays Ready) need another node too, once
    the faulty one is fenced, but the Job counts them: the pod failed on its own, against ``backoffLimitPerIndex``.
    """

    name: str
    detection_s: dict[str, float]
    share: float = 0.0
    rate_per_hour: float | None = None
    per: str = "node"
    node_loss: bool = False
    ready_node: bool = False

    @property
    def needs_node(self) -> bool:
        """Recovered only on another node: a spare, or a new one."""
        return self.node_loss or self.ready_node

    def __post_init__(self) -> None:
        where = f"fault class {self.name!r}"
        if self.node_loss and self.ready_node:
            raise ScenarioError(f"{where}: node_loss and ready_node exclude each other")
        if not self.detection_s or set(self.detection_s) - set(LAYERS):
            raise ScenarioError(f"{where}: detection_s needs layers among {', '.join(LAYERS)} (got {self.detection_s})")
        if any(not (math.isfinite(v) and v >= 0) for v in self.detection_s.values()):
            raise ScenarioError(f"{where}: detection_s values must be >= 0 (got {self.detection_s})")
        if self.per not in ("node", "gpu"):
            raise ScenarioError(f"{where}: per must be node or gpu (got {self.per!r})")
        if self.share < 0 or (self.rate_per_hour is not None and self.rate_per_hour < 0):
            raise ScenarioError(f"{where}: share and rate_per_hour must be >= 0")

    @property
    def first_layer(self) -> str:
        """The lowest layer that can recover it."""
        return next(layer for layer in LAYERS if layer in self.detection_s)


@dataclass(frozen=True)
class LayerParams:
    """One recovery layer: detection -> workers back in the loop (``restart``), and its restart budget.

    ``budget`` restarts (None = unlimited) before the next layer up takes over; in-process's counter resets when the
    process is replaced, ft_launcher's when the pod is. The job layer counts per node index, as the training Job's
    ``backoffLimitPerIndex`` does (``charts/training_job.py``), and not a lost node (its ``podFailurePolicy``
    ignores ``DisruptionTarget``); a spent job budget fails the Job, and it runs again after ``resubmit_s``.
    ``fail_p`` is the chance that one restart attempt fails and escalates to the next layer.
    """

    restart: Dist
    budget: int | None = None
    fail_p: float = 0.0

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 0:
            raise ScenarioError(f"budget must be >= 0 or unlimited (got {self.budget})")
        if not 0 <= self.fail_p <= 1:
            raise ScenarioError(f"fail_p must be within 0 ... 1 (got {self.fail_p})")


def default_fault_classes(cfg: ProjectConfig | None = None) -> tuple[FaultClass, ...]:
    """The default mix, from Llama 3's Table 5 (419 unexpected interruptions), and the timeouts of ``cfg``.

    * ``exception`` 13.4%: software bugs (54) and dependencies (2); any layer, noticed at once.
    * ``hang`` 10.0%: network switch / cable (35) and NCCL watchdog timeouts (7); noticed at the in-process soft
      timeout, else ft_launcher's rank heartbeat timeout, else torch's NCCL watchdog.
    * ``gpu_fault`` 64.0%: GPU (268: faulty GPU, HBM3, SRAM, GSP, SDC, thermal). The node stays Ready: the pod fails at
      once and the Job counts it; the node is fenced (its ``AcceleratedHardwareReady`` condition) and the new pod
      runs on another node (``ready_node``).
    * ``node_loss`` 12.6%: host (21) and unplanned host maintenance (32): the node is gone; its pod is deleted
      :data:`EKS_EVICTION_S` later (measured on the EKS timeline) and its index replaced on another node, uncounted.
    """
    cfg = cfg or ProjectConfig()
    return (
        FaultClass("exception", {"inprocess": 0.0, "ft_launcher": 0.0, "job": 0.0}, share=56 / 419),
        FaultClass(
            "hang",
            {
                "inprocess": cfg.inprocess.soft_timeout_s,
                "ft_launcher": cfg.ft.rank_heartbeat_timeout_s,
                "job": NCCL_WATCHDOG_S,
            },
            share=42 / 419,
        ),
        FaultClass("gpu_fault", {"job": 0.0}, share=268 / 419, ready_node=True),
        FaultClass("node_loss", {"job": EKS_EVICTION_S}, share=53 / 419, node_loss=True),
    )


def default_layers(cfg: ProjectConfig | None = None) -> dict[str, LayerParams]:
    """Published per-fault recovery (p95 assumed 1.5 x p50) with ``cfg``'s restart budgets."""
    cfg = cfg or ProjectConfig()
    return {
        "inprocess": LayerParams(Dist(10.0, 15.0), budget=cfg.inprocess.max_iterations),
        "ft_launcher": LayerParams(Dist(17.0, 25.5), budget=cfg.ft.max_restarts),
        "job": LayerParams(Dist(270.0, 405.0), budget=cfg.job.backoff_limit),
    }


@dataclass(frozen=True)
class Scenario:
    """Everything one simulated job needs. Defaults are documented next to each field."""

    # --- run
    steps: int = 1000  # optimizer steps to reach the target
    step_s: float | None = None  # pure step time (forward, backward, optimizer); needed unless step_s_by_nodes
    step_s_by_nodes: dict[int, float] | None = None  # measured step times by node count, interpolated in log2(nodes)
    # --- checkpoints
    interval: int = 0  # steps between persistent checkpoints (0 = none)
    checkpoint_mode: str | None = None  # async | sync; None = the recovery mode's
    stall_s: float = 0.0  # the loop is blocked per save (async: staging; sync: stall_s + write_s)
    first_stall_s: float | None = None  # the first save of each new process (None = stall_s)
    write_s: float | None = None  # background write after staging; None = checkpoint bytes / storage throughput
    # --- storage (used when write_s / restore_s are None)
    checkpoint_gb: float | None = None  # bytes of one checkpoint; None = model_params_b x bytes_per_param
    model_params_b: float | None = None  # model size, billions of parameters
    bytes_per_param: float = 12.0  # fp32 weights + two fp32 Adam moments
    fsx_capacity_gib: int = 1200  # FSx for Lustre capacity
    fsx_mbps_per_tib: float = 200.0  # SCRATCH_2 baseline throughput per TiB
    node_mbps: float | None = None  # one node's share of storage throughput (None = no per-node limit)
    # --- restore
    restore_s: Dist | None = None  # read + verify + re-initialise; None = read_s from storage + verify_s + reinit_s
    verify_s: float = 0.0
    reinit_s: float = 0.0
    # --- memory tier: survives in-process and ft_launcher restarts; a new pod only through a peer's copy
    memory_interval: int = 0  # steps between memory-tier saves (0 = off)
    memory_stall_s: float = 0.0
    memory_restore_s: float = 0.0
    #: Each snapshot is also held on another node (``training/checkpoint/memtier.py``): with more than one node, any
    #: single pod or node lost restores from memory; only a resubmitted job starts from storage.
    memory_peer_copies: bool = False
    # --- start-up: launch -> workers in the loop, at the job's start and after every pod restart
    startup_s: float = 0.0
    startup_per_node_s: float = 0.0
    # --- cluster and faults
    mode: str = RecoveryMode.INPROCESS_FT.value
    nodes: int = 1
    gpus_per_node: int = 8
    node_mtbf_hours: float | None = None  # scales every class's ``share``; None = only explicit rates and schedule
    fault_classes: tuple[FaultClass, ...] = field(default_factory=default_fault_classes)
    fault_schedule: tuple[tuple[int, str], ...] = ()  # (step, class name): fires once when the step first runs
    layers: dict[str, LayerParams] = field(default_factory=default_layers)
    spares: int = 0  # spare nodes: a node loss takes one instead of waiting node_replace_s
    node_replace_s: float = 600.0  # a new node: launch, boot, join, pull the image
    resubmit_s: float = 3600.0  # the job failed (job budget spent): until someone resubmits it
    # --- simulation
    trials: int = 200
    seed: int = 0

    def validate(self) -> Scenario:
        """Raise :class:`ScenarioError` naming the first bad field; return self."""
        _positive_int(self.steps, "steps")
        if self.step_s is None and not self.step_s_by_nodes:
            raise ScenarioError("step_s: give the step time (--step-s) or measured points (--step-s-by-nodes)")
        if self.step_s is not None and not (math.isfinite(self.step_s) and self.step_s > 0):
            raise ScenarioError(f"step_s: must be > 0 seconds (got {self.step_s})")
        for n, s in (self.step_s_by_nodes or {}).items():
            if n < 1 or not s > 0:
                raise ScenarioError(f"step_s_by_nodes: needs nodes >= 1 and seconds > 0 (got {n}: {s})")
        if self.interval < 0 or self.memory_interval < 0:
            raise ScenarioError("interval / memory_interval: steps >= 0 (0 = no checkpoints)")
        if self.mode not in {m.value for m in RecoveryMode}:
            allowed = ", ".join(m.value for m in RecoveryMode)
            raise ScenarioError(f"mode: must be one of {allowed} (got {self.mode!r})")
        if self.checkpoint_mode is not None and self.checkpoint_mode not in CHECKPOINT_MODES:
            raise ScenarioError(f"checkpoint_mode: must be async or sync (got {self.checkpoint_mode!r})")
        for name in ("stall_s", "verify_s", "reinit_s", "memory_stall_s", "memory_restore_s", "startup_s",
                     "startup_per_node_s", "node_replace_s", "resubmit_s", "bytes_per_param"):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ScenarioError(f"{name}: must be a number >= 0 (got {value})")
        for name in ("first_stall_s", "write_s", "checkpoint_gb", "model_params_b", "node_mbps"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ScenarioError(f"{name}: must be a number >= 0 (got {value})")
        _positive_int(self.nodes, "nodes")
        _positive_int(self.gpus_per_node, "gpus_per_node")
        _positive_int(self.trials, "trials")
        if self.spares < 0:
            raise ScenarioError(f"spares: must be >= 0 (got {self.spares})")
        if self.node_mtbf_hours is not None and not self.node_mtbf_hours > 0:
            raise ScenarioError(f"node_mtbf_hours: must be > 0 hours (got {self.node_mtbf_hours})")
        if self.fsx_capacity_gib <= 0 or self.fsx_mbps_per_tib <= 0:
            raise ScenarioError("fsx_capacity_gib / fsx_mbps_per_tib: must be > 0")
        if set(self.layers) != set(LAYERS):
            raise ScenarioError(f"layers: needs exactly {', '.join(LAYERS)} (got {', '.join(sorted(self.layers))})")
        names = [c.name for c in self.fault_classes]
        if len(set(names)) != len(names):
            raise ScenarioError(f"fault_classes: names must be unique (got {names})")
        for step, name in self.fault_schedule:
            if name not in names or not 1 <= step <= self.steps:
                raise ScenarioError(
                    f"fault_schedule: {name}@{step} needs a class among {', '.join(names)} "
                    f"and 1 <= step <= {self.steps}"
                )
        return self

    # ------------------------------------------------------------------ derived inputs
    @property
    def layers_on(self) -> tuple[str, ...]:
        """The layers the recovery mode turns on; the job layer (Kubernetes) is always there."""
        ml = MODE_LAYERS[RecoveryMode(self.mode)]
        return tuple(layer for layer, on in zip(LAYERS, (ml.inprocess, ml.ft_launcher, True), strict=True) if on)

    @property
    def ckpt_mode(self) -> str:
        return self.checkpoint_mode or MODE_LAYERS[RecoveryMode(self.mode)].checkpoint_mode

    @property
    def memory_every(self) -> int:
        """Steps between memory-tier snapshots in this mode: ``memory_interval``, or 0 in a mode that runs without
        the tier (``k8s-only``, the published baseline: storage only, as training runs it)."""
        return self.memory_interval if MODE_LAYERS[RecoveryMode(self.mode)].memory_tier else 0

    @property
    def step_time(self) -> float:
        """Step time at ``nodes``: ``step_s``, else interpolated linearly in log2(nodes) between measured points."""
        if not self.step_s_by_nodes:
            assert self.step_s is not None
            return self.step_s
        pts = sorted(self.step_s_by_nodes.items())
        if len(pts) == 1:
            return pts[0][1]
        xs = [math.log2(n) for n, _ in pts]
        x = math.log2(self.nodes)
        i = min(max(np.searchsorted(xs, x) - 1, 0), len(pts) - 2)  # the segment (extrapolate the end ones)
        (x0, y0), (x1, y1) = (xs[i], pts[i][1]), (xs[i + 1], pts[i + 1][1])
        return max(y0 + (y1 - y0) * (x - x0) / (x1 - x0), 1e-9)

    @property
    def startup(self) -> float:
        return self.startup_s + self.startup_per_node_s * self.nodes

    @property
    def checkpoint_bytes(self) -> float | None:
        if self.checkpoint_gb is not None:
            return self.checkpoint_gb * 1e9
        if self.model_params_b is not None:
            return self.model_params_b * 1e9 * self.bytes_per_param
        return None

    @property
    def storage_mbps(self) -> float:
        """Write (= read) throughput: min(nodes x per-node share, FSx throughput per TiB x capacity)."""
        fsx = self.fsx_mbps_per_tib * self.fsx_capacity_gib / 1024
        return fsx if self.node_mbps is None else min(self.nodes * self.node_mbps, fsx)

    @property
    def write_time(self) -> float:
        if self.write_s is not None:
            return self.write_s
        b = self.checkpoint_bytes
        return 0.0 if b is None else b / (self.storage_mbps * 1e6)

    @property
    def restore_dist(self) -> Dist:
        if self.restore_s is not None:
            return self.restore_s
        b = self.checkpoint_bytes
        read = 0.0 if b is None else b / (self.storage_mbps * 1e6)
        return Dist(read + self.verify_s + self.reinit_s)

    def class_rates_per_s(self) -> list[float]:
        """Each fault class's rate for the whole job, per second."""
        node_rate = 1.0 / self.node_mtbf_hours if self.node_mtbf_hours else 0.0
        out = []
        for c in self.fault_classes:
            units = self.nodes * (self.gpus_per_node if c.per == "gpu" else 1)
            per_unit = c.rate_per_hour if c.rate_per_hour is not None else c.share * node_rate
            out.append(per_unit * units / 3600.0)
        return out

    @property
    def cluster_mtbf_s(self) -> float:
        """Mean time between random faults of the whole job (inf without any)."""
        rate = sum(self.class_rates_per_s())
        return math.inf if rate <= 0 else 1.0 / rate

    def with_(self, **changes: Any) -> Scenario:
        """A validated copy with ``changes``."""
        return replace(self, **changes).validate()

    def to_json(self) -> dict[str, Any]:
        """The resolved inputs, as written into whatif.json."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Dist):
                value = value.to_json()
            elif f.name == "fault_classes":
                value = [
                    {"name": c.name, "share": c.share, "rate_per_hour": c.rate_per_hour, "per": c.per}
                    | {"node_loss": c.node_loss, "ready_node": c.ready_node, "detection_s": c.detection_s}
                    for c in value
                ]
            elif f.name == "layers":
                value = {
                    k: {"restart": v.restart.to_json(), "budget": v.budget, "fail_p": v.fail_p}
                    for k, v in value.items()
                }
            elif f.name == "fault_schedule":
                value = [{"step": s, "class": c} for s, c in value]
            elif f.name == "step_s_by_nodes" and value:
                value = {str(k): v for k, v in value.items()}
            out[f.name] = value
        out["derived"] = {
            "step_s": self.step_time,
            "checkpoint_mode": self.ckpt_mode,
            "layers_on": list(self.layers_on),
            "write_s": self.write_time,
            "restore_s": self.restore_dist.to_json(),
            "startup_s": self.startup,
            "storage_mbps": self.storage_mbps,
            "cluster_mtbf_hours": self.cluster_mtbf_s / 3600 if math.isfinite(self.cluster_mtbf_s) else None,
        }
        return out


def _positive_int(value: Any, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ScenarioError(f"{name}: must be a whole number >= 1 (got {value!r})")
