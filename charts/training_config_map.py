"""ConfigMap carrying the fully resolved project configuration to every pod, named after its content."""

from __future__ import annotations

import hashlib

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.names import CONFIG_KEY, group_labels, with_dataset_dir
from platform_config import ProjectConfig, resolved_json

#: Label with the content hash, so that a run's ConfigMaps can be listed (and old ones deleted) by selector.
CONFIG_HASH_LABEL = "training.fsdp/config-hash"


def config_payload(cfg: ProjectConfig) -> str:
    """``config.json``: ``resolved_json(cfg)``, where an unset ``train.data_dir`` points at the dataset-preparation
    Job's output (``charts.names.with_dataset_dir``)."""
    return resolved_json(with_dataset_dir(cfg))


def config_hash(cfg: ProjectConfig) -> str:
    return hashlib.sha256(config_payload(cfg).encode()).hexdigest()[:10]


def config_map_name(cfg: ProjectConfig) -> str:
    """``<job_name>-config-<hash>``: one ConfigMap per configuration, so that a pod of a running Job (a replacement
    included) never reads another run's settings after a later ``make submit`` applied its own."""
    return f"{cfg.job.job_name}-config-{config_hash(cfg)}"


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
