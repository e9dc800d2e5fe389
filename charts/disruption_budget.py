"""PodDisruptionBudget of a training Job: one voluntary eviction at a time (docs/kubernetes.md, "Draining a node").

Every pod of the Job is needed at once, so a second eviction while one pod is away is refused. One is admitted: the
node termination handler drains a node through the Eviction API (a Capacity Block's scale-in, a rolling update, an
EC2 scheduled change), and a budget of 0 made it retry until its drain timed out, after which the instance was
terminated with the pod still running (aws-node-termination-handler #535, #448): no grace period, no clean stop. With
1, the pod gets ``DisruptionTarget`` (``podFailurePolicy``: Ignore), SIGTERM and its whole
``terminationGracePeriodSeconds`` (the checkpoint section timeout) to finish its checkpoint write before the node goes.
Node failures and preemption are involuntary and not governed by a budget.
"""

from __future__ import annotations

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.names import job_name, training_pod_labels
from platform_config import ProjectConfig, RecoveryMode

#: Evictions the budget admits at once: the termination handler's drain of one node.
MAX_UNAVAILABLE = 1


class TrainingDisruptionBudget(Construct):
    """``maxUnavailable:`` :data:`MAX_UNAVAILABLE` over the Job's pods; ``unhealthyPodEvictionPolicy: AlwaysAllow``,
    so a pod that is not Ready (stuck starting) never blocks a drain."""

    def __init__(self, scope: Construct, id: str, cfg: ProjectConfig, mode: RecoveryMode) -> None:
        super().__init__(scope, id)
        self.name = job_name(cfg, mode)
        self.resource = k8s.KubePodDisruptionBudget(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=training_pod_labels(cfg, mode)),
            spec=k8s.PodDisruptionBudgetSpec(
                max_unavailable=k8s.IntOrString.from_number(MAX_UNAVAILABLE),
                selector=k8s.LabelSelector(match_labels=training_pod_labels(cfg, mode)),
                unhealthy_pod_eviction_policy="AlwaysAllow",
            ),
        )
