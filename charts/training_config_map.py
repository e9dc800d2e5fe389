"""ConfigMap carrying the fully resolved project configuration to every pod, named after its content."""

from __future__ import annotations

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.names import CONFIG_HASH_LABEL, CONFIG_KEY, config_hash, config_map_name, config_payload, group_labels
from platform_config import ProjectConfig


class TrainingConfigMap(Construct):
    """``<job_name>-config-<hash>`` with ``config.json`` = :func:`config_payload`."""

    def __init__(self, scope: Construct, id: str, cfg: ProjectConfig) -> None:
        super().__init__(scope, id)
        self.name = config_map_name(cfg)
        labels = {**group_labels(cfg), CONFIG_HASH_LABEL: config_hash(cfg)}
        self.resource = k8s.KubeConfigMap(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=labels),
            data={CONFIG_KEY: config_payload(cfg)},
        )
