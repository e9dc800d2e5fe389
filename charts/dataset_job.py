"""Dataset preparation: a CPU Job that tokenizes the text corpus into shards on FSx, before training.

It runs on the system nodes (``cluster.system_node_labels``), which mount FSx like the GPU nodes (both carry the
cluster security group that the file system admits, stacks/fsx_storage.py), so the data can be prepared before
GPU capacity (a Capacity Block) even starts. Its requests come from ``dataset_prep`` (the configuration checks they
fit in half a system node) and ``activeDeadlineSeconds`` bounds it; ``make submit`` waits for it to complete before
it applies the training Job. The ConfigMap the training reads points ``train.data_dir`` at its output
(:func:`with_dataset_dir`), so training reads the prepared shards by default.
"""

from __future__ import annotations

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.names import dataset_dir, dataset_job_name, group_labels
from charts.pod_security import AUTOMOUNT_SERVICE_ACCOUNT_TOKEN, dataset_security_context, pod_security_context
from charts.volumes import shared_mounts, shared_volumes
from platform_config import ProjectConfig

_BACKOFF_LIMIT = 2


def resource_quantities(cfg: ProjectConfig) -> dict[str, str]:
    """Requests (= limits) of the dataset pod, from ``dataset_prep``: cpu in millicores, memory in Gi."""
    prep = cfg.dataset_prep
    return {"cpu": f"{round(prep.cpu * 1000)}m", "memory": f"{prep.memory_gib}Gi"}


def prepare_data_args(cfg: ProjectConfig) -> list[str]:
    """``python -m training.data.prepare``: tokenize ``train.corpus_source`` (or generate the offline corpus) into
    shards at :func:`dataset_dir`, with the tokenizer of ``model.hf_checkpoint`` when set. Training reads them
    when ``train.data_dir`` points there."""
    source = ["--source", cfg.train.corpus_source] if cfg.train.corpus_source else []
    source = source or ["--generate", f"{cfg.train.generated_corpus_mb:g}"]
    tokenizer = ["--tokenizer", cfg.model.hf_checkpoint] if cfg.model.hf_checkpoint else []
    return ["python", "-m", "training.data.prepare", "--out", dataset_dir(cfg), *source, *tokenizer]


class DatasetJob(Construct):
    """``<job_name>-prepare-data``: one pod on a system node, retried ``_BACKOFF_LIMIT`` times within
    ``dataset_prep.active_deadline_seconds``, cleaned up after the TTL."""

    def __init__(self, scope: Construct, id: str, cfg: ProjectConfig, *, image: str) -> None:
        super().__init__(scope, id)
        self.name = dataset_job_name(cfg)
        labels = {**group_labels(cfg), "app.kubernetes.io/component": "dataset-prep"}
        quantities = {k: k8s.Quantity.from_string(v) for k, v in resource_quantities(cfg).items()}
        container = k8s.Container(
            name="prepare-data",
            image=image,
            command=prepare_data_args(cfg),
            resources=k8s.ResourceRequirements(requests=dict(quantities), limits=dict(quantities)),
            security_context=dataset_security_context(),
            volume_mounts=shared_mounts(cfg),
        )
        self.resource = k8s.KubeJob(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=labels),
            spec=k8s.JobSpec(
                backoff_limit=_BACKOFF_LIMIT,
                active_deadline_seconds=cfg.dataset_prep.active_deadline_seconds,
                ttl_seconds_after_finished=cfg.job.ttl_seconds_after_finished,
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        restart_policy="Never",
                        service_account_name=cfg.job.service_account,
                        automount_service_account_token=AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
                        enable_service_links=False,
                        node_selector=dict(cfg.cluster.system_node_labels),
                        security_context=pod_security_context(),
                        containers=[container],
                        volumes=shared_volumes(cfg),
                    ),
                ),
            ),
        )
