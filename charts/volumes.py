"""Volumes shared by the training and dataset pods: the config map and the FSx for Lustre claim."""

from __future__ import annotations

from cdk8s_plus_36 import k8s

from charts.names import CONFIG_DIR, config_map_name
from platform_config import ProjectConfig

CONFIG_VOLUME = "config"
FSX_VOLUME = "fsx"


def shared_volumes(cfg: ProjectConfig) -> list[k8s.Volume]:
    return [
        k8s.Volume(name=CONFIG_VOLUME, config_map=k8s.ConfigMapVolumeSource(name=config_map_name(cfg))),
        k8s.Volume(
            name=FSX_VOLUME,
            persistent_volume_claim=k8s.PersistentVolumeClaimVolumeSource(claim_name=cfg.storage.pvc_name),
        ),
    ]


def shared_mounts(cfg: ProjectConfig) -> list[k8s.VolumeMount]:
    return [
        k8s.VolumeMount(name=CONFIG_VOLUME, mount_path=CONFIG_DIR, read_only=True),
        k8s.VolumeMount(name=FSX_VOLUME, mount_path=cfg.storage.mount_path),
    ]
