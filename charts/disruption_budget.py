"""PodDisruptionBudget of a training Job: voluntary evictions (a ``kubectl drain``, the cluster autoscaler) are
refused while the Job runs, unless the operator means it (docs/kubernetes.md, "Draining a node").

Every pod of the Job is needed at once: an eviction stops the whole job until the pod is replaced. Node failures and
preemption are involuntary and not governed by a budget; the Job's ``podFailurePolicy`` handles them.
"""

from __future__ import annotations

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.names import job_name, training_pod_labels
from platform_config import ProjectConfig, RecoveryMode


class TrainingDisruptionBudget(Construct):
    """``maxUnavailable: 0`` over the Job's pods; ``unhealthyPodEvictionPolicy: AlwaysAllow``, so a pod that is not
    Ready (stuck starting) never blocks a drain."""

    def __init__(self, scope: Construct, id: str, cfg: ProjectConfig, mode: RecoveryMode) -> None:
        super().__init__(scope, id)
        self.name = job_name(cfg, mode)
        self.resource = k8s.KubePodDisruptionBudget(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=training_pod_labels(cfg, mode)),
            spec=k8s.PodDisruptionBudgetSpec(
                max_unavailable=k8s.IntOrString.from_number(0),
                selector=k8s.LabelSelector(match_labels=training_pod_labels(cfg, mode)),
                unhealthy_pod_eviction_policy="AlwaysAllow",
            ),
        )
