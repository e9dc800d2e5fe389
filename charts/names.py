"""Kubernetes object names and labels derived from the config, shared by every chart."""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath

from platform_config import ProjectConfig, RecoveryMode, resolved_json

#: Pod hostnames of an Indexed Job are ``<job>-<index>``; a DNS label holds at most 63 characters.
_MAX_HOSTNAME = 63
#: Where the ConfigMap's ``config.json`` is mounted in every pod.
CONFIG_DIR = "/etc/training"
CONFIG_KEY = "config.json"
CONFIG_PATH = f"{CONFIG_DIR}/{CONFIG_KEY}"
#: The container name that ``podFailurePolicy`` exit-code rules refer to.
TRAINER_CONTAINER = "trainer"


def job_name(cfg: ProjectConfig, mode: RecoveryMode) -> str:
    """``<job_name>-<mode>``: one Job per recovery mode, so variants can run side by side."""
    name = f"{cfg.job.job_name}-{mode.value}"
    longest_host = f"{name}-{cfg.gpu_nodes.node_count - 1}"
    if len(longest_host) > _MAX_HOSTNAME:
        raise ValueError(f"job name {name!r} gives pod hostname {longest_host!r} longer than {_MAX_HOSTNAME} chars")
    return name


def service_name(cfg: ProjectConfig) -> str:
    """The headless Service every training pod names as its ``subdomain``."""
    return cfg.job.job_name


def dataset_job_name(cfg: ProjectConfig) -> str:
    return f"{cfg.job.job_name}-prepare-data"


def group_labels(cfg: ProjectConfig) -> dict[str, str]:
    """Labels on every object of this project; the headless Service selects training pods by them."""
    return {"app.kubernetes.io/part-of": cfg.job.job_name, "app.kubernetes.io/managed-by": "cdk8s"}


def training_pod_labels(cfg: ProjectConfig, mode: RecoveryMode) -> dict[str, str]:
    return {**group_labels(cfg), "app.kubernetes.io/component": "training", "training.fsdp/mode": mode.value}


def run_dir(cfg: ProjectConfig, mode: RecoveryMode) -> str:
    """The run directory on FSx: ``<mount_path>/runs/<job_name>-<mode>``."""
    return f"{cfg.storage.mount_path}/runs/{job_name(cfg, mode)}"


def rendezvous_host(cfg: ProjectConfig, mode: RecoveryMode) -> str:
    """Rank 0's stable DNS name: pod ``<job>-0`` under the headless Service (pod ``subdomain``)."""
    return f"{job_name(cfg, mode)}-0.{service_name(cfg)}"


def dataset_dir(cfg: ProjectConfig) -> str:
    """``train.data_dir`` if set, else ``<mount_path>/data/<model>-seq<seq_len>``, where ``<model>`` is
    ``hf-<directory name>`` with ``model.hf_checkpoint`` (its tokenizer makes different shards) or the size."""
    hf = cfg.model.hf_checkpoint
    model = f"hf-{PurePosixPath(hf).name}" if hf else cfg.model.size
    return cfg.train.data_dir or f"{cfg.storage.mount_path}/data/{model}-seq{cfg.train.seq_len}"


def with_dataset_dir(cfg: ProjectConfig) -> ProjectConfig:
    """``cfg`` with ``train.data_dir`` = :func:`dataset_dir` (the Job's output) when it is unset: what the cluster
    ConfigMap ships, so training reads the prepared shards instead of generating a corpus in its run directory."""
    if cfg.train.data_dir:
        return cfg
    return cfg.model_copy(update={"train": cfg.train.model_copy(update={"data_dir": dataset_dir(cfg)})})


#: Label with the ConfigMap's content hash, so that a run's ConfigMaps can be listed (and old ones deleted) by selector.
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
