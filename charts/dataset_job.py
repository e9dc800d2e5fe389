"""Dataset preparation: a CPU Job that tokenizes the text corpus into shards on FSx."""

from __future__ import annotations

from pathlib import PurePosixPath

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.names import dataset_job_name, group_labels
from charts.volumes import shared_mounts, shared_volumes
from platform_config import ProjectConfig

#: What the tokenizer pod asks for (CPU-only work; runs on the system nodes).
_CPU = "4"
_MEMORY = "16Gi"
_BACKOFF_LIMIT = 2


def dataset_dir(cfg: ProjectConfig) -> str:
    """``train.data_dir`` if set, else ``<mount_path>/data/<model>-seq<seq_len>``, where ``<model>`` is
    ``hf-<directory name>`` with ``model.hf_checkpoint`` (its tokenizer makes different shards) or the size."""
    hf = cfg.model.hf_checkpoint
    model = f"hf-{PurePosixPath(hf).name}" if hf else cfg.model.size
    return cfg.train.data_dir or f"{cfg.storage.mount_path}/data/{model}-seq{cfg.train.seq_len}"


def prepare_data_args(cfg: ProjectConfig) -> list[str]:
    """``python -m training.data.prepare``: tokenize ``train.corpus_source`` (or generate the offline corpus) into
    shards at :func:`dataset_dir`, with the tokenizer of ``model.hf_checkpoint`` when set. Training reads them
    when ``train.data_dir`` points there."""
    source = ["--source", cfg.train.corpus_source] if cfg.train.corpus_source else []
    source = source or ["--generate", f"{cfg.train.generated_corpus_mb:g}"]
    tokenizer = ["--tokenizer", cfg.model.hf_checkpoint] if cfg.model.hf_checkpoint else []
    return ["python", "-m", "training.data.prepare", "--out", dataset_dir(cfg), *source, *tokenizer]


class DatasetJob(Construct):
    """``<job_name>-prepare-data``: one pod, retried ``_BACKOFF_LIMIT`` times, cleaned up after the TTL."""

    def __init__(self, scope: Construct, id: str, cfg: ProjectConfig, *, image: str) -> None:
        super().__init__(scope, id)
        self.name = dataset_job_name(cfg)
        labels = {**group_labels(cfg), "app.kubernetes.io/component": "dataset-prep"}
        quantities = {"cpu": k8s.Quantity.from_string(_CPU), "memory": k8s.Quantity.from_string(_MEMORY)}
        container = k8s.Container(
            name="prepare-data",
            image=image,
            command=prepare_data_args(cfg),
            resources=k8s.ResourceRequirements(requests=dict(quantities), limits=dict(quantities)),
            volume_mounts=shared_mounts(cfg),
        )
        self.resource = k8s.KubeJob(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=labels),
            spec=k8s.JobSpec(
                backoff_limit=_BACKOFF_LIMIT,
                ttl_seconds_after_finished=cfg.job.ttl_seconds_after_finished,
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        restart_policy="Never",
                        service_account_name=cfg.job.service_account,
                        enable_service_links=False,
                        containers=[container],
                        volumes=shared_volumes(cfg),
                    ),
                ),
            ),
        )
