"""Node-level faults of the local cluster: a node lost with everything on it, or a pod evicted.

Schedule syntax, mixed freely with the trainer's in-pod faults (``kind@step[:rank]...``, which keep their global
rank): ``node-loss@STEP:POD`` and ``evict@STEP:POD``, where POD is the completion index. A node fault fires once,
as soon as any rank logged a ``step`` event at or beyond STEP.

* ``node-loss``: the pod's network link goes down first (its peers see silence, not a closed connection, as when a
  machine dies), then every process of the pod is SIGKILLed. The pod gets ``DisruptionTarget`` (reason
  ``DeletionByTaintManager``) and stays terminating until its node is gone: the replacement can start
  ``node_replace_s`` later (NotReady detection, taint-based eviction, the Node object's deletion and a spare or
  new node, all in one number).
* ``gpu-fault`` (EKS timeline only: :mod:`training.cluster.eks_nodes`): a GPU fault on a node that stays Ready.
* ``node-hang``: the same on the fast timeline; on the EKS one (:mod:`training.cluster.eks_nodes`) the instance
  stays alive and silent, so nothing deletes its Node unless it is fenced.
* ``evict``: ``DisruptionTarget`` (reason ``EvictionByEvictionAPI``), SIGTERM to the container's PID 1, SIGKILL after
  the pod's ``terminationGracePeriodSeconds``; the node stays, so the replacement may start as soon as the pod ended
  (and its back-off elapsed). This is what a preemption or a drain that bypasses the PodDisruptionBudget does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NODE_FAULT_KINDS = ("node-loss", "node-hang", "gpu-fault", "evict")
_NODE_FAULT = re.compile(r"^(node-loss|node-hang|gpu-fault|evict)@(\d+):(\d+)$")


@dataclass(frozen=True)
class NodeFault:
    kind: str
    step: int
    pod: int

    def __str__(self) -> str:
        return f"{self.kind}@{self.step}:{self.pod}"


def split_schedule(spec: str, pods: int) -> tuple[list[NodeFault], str]:
    """(node faults, the remaining in-pod schedule) of a comma-separated fault schedule.

    Raises ``ValueError`` naming the entry for a malformed node fault or a pod index outside ``0..pods-1``.
    """
    node: list[NodeFault] = []
    rest: list[str] = []
    for raw in filter(None, (s.strip() for s in (spec or "").split(","))):
        if raw.split("@", 1)[0] not in NODE_FAULT_KINDS:
            rest.append(raw)
            continue
        m = _NODE_FAULT.match(raw)
        if not m:
            raise ValueError(
                f"bad node fault {raw!r}: expected " + ", ".join(f"{k}@STEP:POD" for k in NODE_FAULT_KINDS)
            )
        fault = NodeFault(m.group(1), int(m.group(2)), int(m.group(3)))
        if fault.pod >= pods:
            raise ValueError(f"node fault {raw!r}: pod index {fault.pod} is not below the {pods} pods of the Job")
        node.append(fault)
    return sorted(node, key=lambda f: f.step), ",".join(rest)
