"""The EKS timeline of a node loss as a clock-free rule set: when a lost node's pod ends, where its replacement runs.

``--node-timeline eks`` of the local cluster; ``fast`` (the default, the tests') keeps one ``--node-replace-s``. Each
phase is a documented Kubernetes or EKS default, and each duration can be overridden (``--timeline-set KEY=SECONDS``):

1. **NotReady.** The kubelet renews its node Lease every ``lease_renew_s`` (10 s: a quarter of the 40 s lease); the
   node lifecycle controller, checking every ``node_monitor_period_s`` (5 s), marks a node whose Lease is older than
   ``node_monitor_grace_s`` NotReady (50 s since Kubernetes 1.32, kubernetes PR #126287; 40 s before) and taints it
   ``node.kubernetes.io/unreachable:NoExecute``.
2. **Taint-based eviction.** The taint manager deletes a pod once its toleration of that taint runs out (the Job's
   manifest: ``tolerationSeconds``); the pod gets ``DisruptionTarget`` (reason ``DeletionByTaintManager``) and stays
   Terminating: its kubelet is gone.
3. **Node deletion and PodGC.** The cloud node-lifecycle controller deletes the Node object once its instance no
   longer exists (a terminated instance; a hung one is never deleted). PodGC (``pkg/controller/podgc``), running
   every ``podgc_period_s`` (20 s), quarantines a pod whose Node is gone for ``podgc_quarantine_s`` (40 s), then
   marks it Failed (``DisruptionTarget``, reason ``DeletionByPodGC``) and deletes it; a Terminating pod on a NotReady
   node tainted ``node.kubernetes.io/out-of-service`` it deletes at its next pass. Only then may the Job controller
   create the replacement (``podReplacementPolicy: Failed``).
4. **Scheduling.** A training pod takes a whole node: the replacement runs on a free Ready node (a spare,
   ``--spare-nodes``, whose image the pre-pull DaemonSet already pulled) or waits for the Auto Scaling group's new
   instance, ``provision_s`` (600 s for a p5) after the old one was terminated. A node freed by a counted failure is
   free again: with no other, the replacement returns to it.
5. **Fencing** (:mod:`training.cluster.fencing`): with ``fence`` on, a node whose Lease is stale while the job reports
   a lost peer, or that is NotReady while its instance is alive, is marked unhealthy in its Auto Scaling group
   (terminated ``fence_terminate_s`` later, then replaced) and tainted out-of-service.

Times are seconds on any clock the caller passes in (the tests use a fake one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

#: The taints this model puts on nodes (Kubernetes' well-known names).
UNREACHABLE = "node.kubernetes.io/unreachable"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True)
class EksTimeline:
    """The documented defaults (module docstring); every field can be overridden."""

    lease_renew_s: float = 10.0
    node_monitor_period_s: float = 5.0
    node_monitor_grace_s: float = 50.0
    podgc_period_s: float = 20.0
    podgc_quarantine_s: float = 40.0
    provision_s: float = 600.0
    fence: bool = True
    fence_poll_s: float = 5.0
    fence_lease_stale_s: float = 20.0
    fence_terminate_s: float = 5.0
    #: aws-node-termination-handler retries an eviction the PodDisruptionBudget refused (HTTP 429) this often.
    eviction_retry_s: float = 5.0

    def with_overrides(self, items: list[str]) -> EksTimeline:
        """``KEY=VALUE`` overrides (``fence=0`` turns fencing off); an unknown key or a negative value is an error."""
        known = {f.name: f for f in fields(self)}
        changes: dict[str, float | bool] = {}
        for item in items:
            key, sep, raw = item.partition("=")
            if not sep or key not in known:
                raise ValueError(f"--timeline-set {item!r}: expected KEY=VALUE with KEY one of {', '.join(known)}")
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"--timeline-set {item!r}: {raw!r} is not a number") from None
            if value < 0 or not math.isfinite(value):
                raise ValueError(f"--timeline-set {item!r}: must be a finite number >= 0")
            changes[key] = bool(value) if key == "fence" else value
        return replace(self, **changes)  # type: ignore[arg-type]


def next_tick(t: float, period: float, origin: float = 0.0) -> float:
    """The first tick ``origin + k * period`` (k an integer) at or after ``t``."""
    if period <= 0:
        return t
    return origin + math.ceil((t - origin) / period - 1e-9) * period


@dataclass
class Node:
    """One GPU node of the pool: its instance, its Lease, its taints and the pod bound to it."""

    name: str
    joined_at: float
    instance: str = "running"  # running | hung | terminated
    lease_stopped_at: float | None = None  # the last Lease renewal before the kubelet went silent
    instance_gone_at: float | None = None
    not_ready_at: float | None = None
    deleted_at: float | None = None
    fenced_at: float | None = None
    oos_at: float | None = None  # tainted out-of-service
    gpu_fault_at: float | None = None  # AcceleratedHardwareReady=False (the node monitoring agent), the node Ready
    cordoned: bool = False
    taints: set[str] = field(default_factory=set)
    pod: str | None = None
    free_since: float = 0.0

    def lease_age(self, now: float) -> float:
        """Seconds since the Lease was last renewed (renewals every ``lease_renew_s`` while the kubelet answers)."""
        return 0.0 if self.lease_stopped_at is None else now - self.lease_stopped_at

    @property
    def ready(self) -> bool:
        return self.not_ready_at is None and self.deleted_at is None and self.instance == "running"

    def schedulable(self) -> bool:
        return self.ready and not self.cordoned and not self.taints and self.pod is None


@dataclass
class BoundPod:
    """A pod the Job created, on its node, as the API server sees it."""

    name: str
    node: str
    toleration_s: float
    terminating_at: float | None = None  # deletionTimestamp
    disruption: str | None = None  # the DisruptionTarget reason
    gone_at: float | None = None  # PodGC marked it Failed and deleted it


@dataclass(frozen=True)
class Happening:
    """Something the control plane did, at the time the rules say it happened (not when it was noticed)."""

    at: float
    kind: str  # NotReady | Evicted | NodeDeleted | PodGone | Fenced | InstanceTerminated | NodeJoined
    subject: str  # a node or a pod
    detail: str = ""


class NodePool:
    """The GPU nodes of the Job and the control plane's rules over them (module docstring)."""

    def __init__(self, timeline: EksTimeline, nodes: int, *, start: float = 0.0) -> None:
        self.tl = timeline
        self.origin = start  # the controllers' periodic loops tick from here
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, BoundPod] = {}
        self.peer_lost_at: float | None = None
        self.log: list[Happening] = []
        self._told = 0  # happenings already returned by advance()
        self._joining: list[float] = []  # when the Auto Scaling group's new instances join
        for _ in range(nodes):
            self._add(start)

    def _add(self, at: float) -> Node:
        node = Node(f"gpu-node-{len(self.nodes) + 1}", joined_at=at, free_since=at)
        self.nodes[node.name] = node
        return node

    # -- what the runner tells the pool --------------------------------------------------------------------------
    def free(self) -> list[Node]:
        """Schedulable nodes (Ready, untainted, uncordoned, no pod), the one free the longest first."""
        return sorted((n for n in self.nodes.values() if n.schedulable()), key=lambda n: (n.free_since, n.name))

    def bind(self, pod: str, node: str, toleration_s: float) -> None:
        """``pod`` runs on ``node`` (whole-node pods: the node is taken)."""
        self.nodes[node].pod = pod
        self.pods[pod] = BoundPod(pod, node, toleration_s)

    def release(self, pod: str, now: float) -> None:
        """The pod ended on a node that still answers (a counted failure, an eviction, the Job's end)."""
        bound = self.pods.pop(pod, None)
        if bound is not None and self.nodes[bound.node].pod == pod:
            self.nodes[bound.node].pod = None
            self.nodes[bound.node].free_since = now

    def lose(self, node_name: str, now: float, *, instance: str) -> None:
        """The node stops answering: its instance ``terminated`` (gone) or ``hung`` (alive, silent)."""
        if instance not in ("terminated", "hung"):
            raise ValueError(f"instance must be terminated or hung, got {instance!r}")
        node = self.nodes[node_name]
        renewals = math.floor((now - node.joined_at) / self.tl.lease_renew_s) if self.tl.lease_renew_s else 0
        node.lease_stopped_at = node.joined_at + renewals * self.tl.lease_renew_s
        node.instance = instance
        if instance == "terminated":
            self._instance_gone(node, now)

    def gpu_fault(self, node_name: str, at: float) -> None:
        """A GPU fault on a node that stays Ready: its pod fails (the runner's), the node's condition says so."""
        self.nodes[node_name].gpu_fault_at = at

    def peer_lost(self, at: float) -> None:
        """The job's own signal: a rank on another node reported a lost peer at ``at``."""
        if self.peer_lost_at is None or at > self.peer_lost_at:
            self.peer_lost_at = at

    def cordon(self, node_name: str) -> None:
        self.nodes[node_name].cordoned = True

    def terminate(self, node_name: str, now: float) -> None:
        """The Auto Scaling group terminates the instance (after a drain): the Node goes, a new instance comes."""
        node = self.nodes[node_name]
        if node.lease_stopped_at is None:
            node.lease_stopped_at = now
        node.instance = "terminated"
        self._instance_gone(node, now)

    def _instance_gone(self, node: Node, at: float) -> None:
        node.instance_gone_at = at
        self._joining.append(at + self.tl.provision_s)
        self._say(
            at,
            "InstanceTerminated",
            node.name,
            f"the Auto Scaling group's new instance joins {self.tl.provision_s:g} s later",
        )

    # -- the control plane ---------------------------------------------------------------------------------------
    def advance(self, now: float) -> list[Happening]:
        """Apply every rule due by ``now``; returns what happened since the last call, in time order."""
        changed = True
        while changed:
            changed = any(
                [
                    self._node_monitor(now),
                    self._fencing(now),
                    self._taint_manager(now),
                    self._cloud_node_lifecycle(now),
                    self._podgc(now),
                    self._autoscaling(now),
                ]
            )
        new, self._told = self.log[self._told :], len(self.log)
        return sorted(new, key=lambda h: h.at)

    def _say(self, at: float, kind: str, subject: str, detail: str = "") -> None:
        self.log.append(Happening(at, kind, subject, detail))

    def _node_monitor(self, now: float) -> bool:
        changed = False
        for node in self.nodes.values():
            if node.lease_stopped_at is None or node.not_ready_at is not None or node.deleted_at is not None:
                continue
            t = next_tick(
                node.lease_stopped_at + self.tl.node_monitor_grace_s, self.tl.node_monitor_period_s, self.origin
            )
            if now >= t:
                node.not_ready_at = t
                node.taints.add(UNREACHABLE)
                self._say(t, "NotReady", node.name, f"Lease last renewed {t - node.lease_stopped_at:g} s before")
                changed = True
        return changed

    def _fencing(self, now: float) -> bool:
        if not self.tl.fence:
            return False
        changed = False
        for node in self.nodes.values():
            if node.fenced_at is not None or node.lease_stopped_at is None or node.deleted_at is not None:
                continue
            signals = []
            if self.peer_lost_at is not None and self.peer_lost_at >= node.lease_stopped_at:
                signals.append(max(node.lease_stopped_at + self.tl.fence_lease_stale_s, self.peer_lost_at))
            if node.not_ready_at is not None:
                signals.append(node.not_ready_at)
            if not signals:
                continue
            t = next_tick(min(signals), self.tl.fence_poll_s, self.origin)
            if now >= t:
                node.fenced_at = t
                why = "stale Lease and a lost peer" if t < (node.not_ready_at or math.inf) else "NotReady"
                if node.instance == "terminated":
                    self._say(t, "Fenced", node.name, f"{why}; its instance is already terminated")
                else:
                    self._say(t, "Fenced", node.name, f"{why}: instance marked unhealthy in its Auto Scaling group")
                    node.instance = "terminated"
                    self._instance_gone(node, t + self.tl.fence_terminate_s)
                changed = True
        for node in self.nodes.values():  # a GPU fault on a Ready node: cordoned, then drained and replaced
            if node.gpu_fault_at is None or node.fenced_at is not None or node.instance != "running":
                continue
            t = next_tick(node.gpu_fault_at, self.tl.fence_poll_s, self.origin)
            if now >= t:
                node.fenced_at, node.cordoned = t, True
                self._say(t, "Fenced", node.name, "AcceleratedHardwareReady=False: cordoned, marked unhealthy")
                changed = True
        for node in self.nodes.values():  # the termination handler drains it; once its pod is gone, it goes
            if node.gpu_fault_at is not None and node.cordoned and node.pod is None and node.instance == "running":
                self.terminate(node.name, max(node.fenced_at or now, node.free_since))
                changed = True
        # Once fenced (its instance gone), the out-of-service taint: the taint manager evicts at once, PodGC deletes.
        for node in self.nodes.values():
            if node.fenced_at is not None and OUT_OF_SERVICE not in node.taints:
                gone = max(node.instance_gone_at or node.fenced_at, node.fenced_at)
                if now >= gone:
                    node.taints.add(OUT_OF_SERVICE)
                    node.oos_at = gone
                    self._say(gone, "OutOfService", node.name, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute")
                    changed = True
        return changed

    def _taint_manager(self, now: float) -> bool:
        changed = False
        for pod in self.pods.values():
            node = self.nodes[pod.node]
            if pod.terminating_at is not None or pod.gone_at is not None:
                continue
            due = []
            if node.not_ready_at is not None and UNREACHABLE in node.taints:
                due.append(node.not_ready_at + pod.toleration_s)
            if OUT_OF_SERVICE in node.taints:  # not tolerated: evicted at once
                due.append(node.oos_at or now)
            if due and now >= min(due):
                pod.terminating_at, pod.disruption = min(due), "DeletionByTaintManager"
                self._say(pod.terminating_at, "Evicted", pod.name, "DisruptionTarget: DeletionByTaintManager")
                changed = True
        return changed

    def _cloud_node_lifecycle(self, now: float) -> bool:
        changed = False
        for node in self.nodes.values():
            if node.deleted_at is not None or node.instance_gone_at is None or node.not_ready_at is None:
                continue
            t = next_tick(max(node.not_ready_at, node.instance_gone_at), self.tl.node_monitor_period_s, self.origin)
            if now >= t:
                node.deleted_at = t
                self._say(t, "NodeDeleted", node.name, "its instance no longer exists")
                changed = True
        return changed

    def _podgc(self, now: float) -> bool:
        changed = False
        period = self.tl.podgc_period_s
        for pod in self.pods.values():
            if pod.gone_at is not None:
                continue
            node = self.nodes[pod.node]
            due = []
            if node.deleted_at is not None:  # orphaned: quarantined at one pass, deleted at a later one
                seen = next_tick(node.deleted_at, period, self.origin)
                due.append((next_tick(seen + self.tl.podgc_quarantine_s, period, self.origin), "orphaned"))
            if pod.terminating_at is not None and OUT_OF_SERVICE in node.taints and node.not_ready_at is not None:
                since = max(pod.terminating_at, node.not_ready_at, node.oos_at or now)
                due.append((next_tick(since, period, self.origin), "out-of-service"))
            if not due:
                continue
            t, why = min(due)
            if now >= t:
                pod.gone_at = t
                if pod.disruption is None:
                    pod.disruption = "DeletionByPodGC"
                self._say(t, "PodGone", pod.name, f"PodGC ({why}): Failed and deleted")
                node.pod = None
                changed = True
        return changed

    def _autoscaling(self, now: float) -> bool:
        ready = sorted(t for t in self._joining if now >= t)
        for t in ready:
            self._joining.remove(t)
            node = self._add(t)
            self._say(t, "NodeJoined", node.name, "the Auto Scaling group's new instance")
        return bool(ready)
