"""The local cluster's GPU nodes on the EKS timeline (``--node-timeline eks``): the runner's side of
:class:`training.cluster.node_timeline.NodePool`.

It places pods on whole nodes (``--spare-nodes`` spares), turns node faults into what EKS does to the node, feeds the
control plane's decisions to the Job controller (``DisruptionTarget``, the pod's end at PodGC time) and keeps, per
loss, the time of each phase (``job.json``'s ``nodeLosses``, and a printed line):

* ``node-loss@STEP:POD``: the instance is terminated (the cloud controller deletes its Node);
* ``node-hang@STEP:POD``: the instance stays alive but silent (nothing deletes its Node unless it is fenced);
* ``gpu-fault@STEP:POD``: a GPU fault on a node that stays Ready: every pod that runs there fails (exit 137, counted)
  until the fencing agent cordons the node (``AcceleratedHardwareReady=False``); then it is drained and replaced;
* ``evict@STEP:POD``: aws-node-termination-handler drains the node through the Eviction API, which honours the Job's
  PodDisruptionBudget: refused evictions are retried every ``eviction_retry_s`` until the drain times out
  (``terminationGracePeriodSeconds`` + NTH's 60 s margin), and then the instance is terminated with the pod on it.
  An admitted eviction gives the pod SIGTERM and its grace period; once it ended, the instance goes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from training.cluster.controller import JobController, PodRun
from training.cluster.manifest import DisruptionBudget, JobManifest
from training.cluster.node_timeline import EksTimeline, Happening, NodePool
from training.resilience.exit_codes import ExitCode

#: Seconds aws-node-termination-handler allows beyond the pod's grace period (stacks/node_termination_handler.py).
DRAIN_MARGIN_S = 60.0


@dataclass
class NodeLoss:
    """One lost node and when each phase of its recovery happened (seconds on the runner's clock)."""

    fault: str
    node: str
    pod: str
    index: int
    at: float
    phases: dict[str, float] = field(default_factory=dict)
    replacement_node: str | None = None

    def to_json(self, t0: float) -> dict[str, Any]:
        rel = {k: round(v - self.at, 3) for k, v in sorted(self.phases.items(), key=lambda kv: kv[1])}
        return {
            "fault": self.fault,
            "node": self.node,
            "pod": self.pod,
            "index": self.index,
            "at_s": round(self.at - t0, 3),
            "phases_s": rel,
            "replacement_node": self.replacement_node,
        }


class EksNodes:
    """Node placement, node faults and the control plane's timeline for one Job of the local cluster."""

    def __init__(
        self,
        timeline: EksTimeline,
        job: JobManifest,
        budget: DisruptionBudget | None,
        *,
        spares: int,
        start: float,
        say: Callable[[str], None],
    ) -> None:
        self.job = job
        self.budget = budget
        self.pool = NodePool(timeline, job.parallelism + spares, start=start)
        self.say = say
        self.losses: list[NodeLoss] = []
        self.lost_pods: set[str] = set()  # pods whose container died with their node: the runner does not reap them
        self.pending_since: dict[int, float] = {}
        self.drains: dict[str, float] = {}  # pod -> when its drain times out (eviction refused so far)
        self.drained: dict[str, str] = {}  # pod -> its node, terminated once the pod ended
        self._next_retry: dict[str, float] = {}
        self.killed: set[str] = set()  # pods on a node with a GPU fault, already killed
        self.changed = False
        self.t0 = start

    # -- scheduling ----------------------------------------------------------------------------------------------
    def place(self, index: int, now: float) -> str | None:
        """A free node for ``index``'s new pod, or None (the pod is Pending; said once per wait)."""
        free = self.pool.free()
        if free:
            waited = self.pending_since.pop(index, None)
            if waited is not None:
                self.say(f"JOB   index {index} scheduled after {now - waited:.1f} s Pending")
            return free[0].name
        if index not in self.pending_since:
            self.pending_since[index] = now
            total = len(self.pool.nodes)
            self.say(
                f"JOB   index {index} Pending: FailedScheduling: 0/{total} nodes are available "
                f"(a training pod needs a whole free Ready node)"
            )
        return None

    def bind(self, pod: PodRun, node: str) -> None:
        self.pool.bind(pod.name, node, self.job.node_failure_toleration_s)
        for loss in self.losses:
            if loss.index == pod.index and loss.replacement_node is None:
                loss.replacement_node = node
                loss.phases["replacement_started"] = pod.created_at

    # -- faults --------------------------------------------------------------------------------------------------
    def lose(self, fault: str, pod: PodRun, now: float, *, instance: str) -> None:
        """The pod's node stops answering (its container is already dead: the runner killed it)."""
        self.pool.lose(pod.node, now, instance=instance)
        self.lost_pods.add(pod.name)
        self.losses.append(NodeLoss(fault, pod.node, pod.name, pod.index, now, {"lost": now}))
        what = "terminated" if instance == "terminated" else "hung (alive, silent)"
        self.say(f"JOB   node {pod.node} lost with pod {pod.name}: instance {what}; the EKS timeline follows")

    def drain(self, fault: str, pod: PodRun, now: float, unavailable: int) -> bool:
        """NTH cordons the node and asks the Eviction API; True when the eviction was admitted now."""
        self.pool.cordon(pod.node)
        if pod.name not in self.drains:
            self.drains[pod.name] = now + self.job.termination_grace_s + DRAIN_MARGIN_S
            self.losses.append(NodeLoss(fault, pod.node, pod.name, pod.index, now, {"drain_started": now}))
        if self.budget is None or self.budget.allows(unavailable):
            del self.drains[pod.name]
            self.drained[pod.name] = pod.node
            self._loss_of(pod.name).phases["evicted"] = now
            return True
        if now >= self._next_retry.get(pod.name, now):
            self.say(
                f"JOB   eviction of {pod.name} refused (429: PodDisruptionBudget {self.budget.name} maxUnavailable "
                f"{self.budget.max_unavailable}); retrying until {self.drains[pod.name] - self.t0:.0f} s"
            )
        self._next_retry[pod.name] = now + self.pool.tl.eviction_retry_s
        return False

    def unavailable(self, controller: JobController) -> int:
        """Pods the disruption budget counts as unavailable: indexes without a running pod on a node that answers."""
        running = [p for p in controller.active() if p.finished_at is None and p.name not in self.lost_pods]
        return sum(1 for s in controller.indexes if not s.succeeded) - len(running)

    def gpu_fault(self, fault: str, pod: PodRun, now: float) -> None:
        """A GPU fault on the pod's node, which stays Ready: every pod that runs there fails (counted)."""
        self.pool.gpu_fault(pod.node, now)
        self.losses.append(NodeLoss(fault, pod.node, pod.name, pod.index, now, {"gpu_fault": now}))
        self.say(f"JOB   GPU fault on {pod.node} (the node stays Ready): its pods fail until it is fenced")

    def step(self, now: float, controller: JobController) -> list[tuple[str, PodRun, str]]:
        """Advance the timeline to ``now`` (:attr:`changed` says whether a pod's state changed) and return what the
        runner must do to pods: ``evict`` (a drain's eviction the budget admitted now), ``gone`` (a drain timed
        out: the instance is terminated with the pod on it), ``kill`` (a pod on a node with a GPU fault)."""
        self.changed = self.tick(now, controller)
        out: list[tuple[str, PodRun, str]] = []
        pods = {p.name: p for p in controller.pods}
        for name, deadline in list(self.drains.items()):
            pod = pods[name]
            if now >= deadline:
                del self.drains[name]
                self.say(f"JOB   drain of {pod.node} timed out: the instance is terminated with {name} running")
                out.append(("gone", pod, f"drain timeout of {pod.node}"))
            elif now >= self._next_retry.get(name, now) and self.drain(name, pod, now, self.unavailable(controller)):
                out.append(("evict", pod, ""))
        faulty = {n.name for n in self.pool.nodes.values() if n.gpu_fault_at is not None}
        for pod in controller.active():
            if pod.node in faulty and pod.finished_at is None and pod.name not in self.killed:
                self.killed.add(pod.name)
                out.append(("kill", pod, ""))
        return out

    def ended(self, pod: PodRun, now: float) -> None:
        """The pod's container ended on a node that answers: the node is free again, or goes if it was drained."""
        node = self.drained.pop(pod.name, None)
        self.pool.release(pod.name, now)
        if node is not None:
            self.pool.terminate(node, now)
            self._loss_of(pod.name).phases["pod_gone"] = now

    def event(self, e: dict[str, Any], nproc: int) -> None:
        """The job's own peer-loss signal: a worker on a node that still answers exited with a lost peer."""
        if e.get("event") != "exit" or e.get("code") != int(ExitCode.PEER_LOST):
            return
        lost = {loss.index for loss in self.losses if "pod_gone" not in loss.phases}
        if lost and int(e.get("rank", -1)) // max(nproc, 1) not in lost:
            self.pool.peer_lost(float(e["ts"]))

    # -- the control plane ---------------------------------------------------------------------------------------
    def tick(self, now: float, controller: JobController) -> bool:
        """Advance the timeline to ``now``; True when a pod's state changed."""
        changed = False
        for h in self.pool.advance(now):
            self.say(f"EKS   +{h.at - self.t0:6.1f}s {h.kind} {h.subject}: {h.detail}")
            changed |= self._apply(h, controller)
        return changed

    def _apply(self, h: Happening, controller: JobController) -> bool:
        pods = {p.name: p for p in controller.pods}
        phase = {
            "NotReady": "not_ready",
            "Fenced": "fenced",
            "OutOfService": "out_of_service",
            "NodeDeleted": "node_deleted",
            "InstanceTerminated": "instance_terminated",
        }.get(h.kind)
        if phase is not None:
            for loss in self.losses:
                if loss.node == h.subject:
                    loss.phases.setdefault(phase, h.at)
            return False
        pod = pods.get(h.subject)
        if pod is None:
            return False
        if h.kind == "Evicted":
            controller.disrupted(pod, "DeletionByTaintManager")
            self._loss_of(pod.name).phases.setdefault("evicted", h.at)
            return True
        if h.kind == "PodGone":
            if "DisruptionTarget" not in pod.conditions:
                controller.disrupted(pod, self.pool.pods[pod.name].disruption or "DeletionByPodGC")
            self._loss_of(pod.name).phases["pod_gone"] = h.at
            if pod.terminal_at is None:
                controller.terminated(pod, None, h.at)
            return True
        return False

    def _loss_of(self, pod: str) -> NodeLoss:
        return next(loss for loss in reversed(self.losses) if loss.pod == pod)

    def report(self) -> list[dict[str, Any]]:
        return [loss.to_json(self.t0) for loss in self.losses]
