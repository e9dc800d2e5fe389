"""ConfigMap carrying the fully resolved project configuration to every pod."""

from __future__ import annotations

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.dataset_job import with_dataset_dir
from charts.names import CONFIG_KEY, config_map_name, group_labels
from platform_config import ProjectConfig, resolved_json


class TrainingConfigMap(Construct):
    """``<job_name>-config`` with ``config.json`` = ``platform_config.resolved_json(cfg)``, where an unset
    ``train.data_dir`` points at the dataset-preparation Job's output (``charts.dataset_job.with_dataset_dir``)."""

    def __init__(self, scope: Construct, id: str, cfg: ProjectConfig) -> None:
        super().__init__(scope, id)
        self.name = config_map_name(cfg)
        self.resource = k8s.KubeConfigMap(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=group_labels(cfg)),
            data={CONFIG_KEY: resolved_json(with_dataset_dir(cfg))},
        )
