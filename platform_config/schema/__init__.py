"""Typed schema of ``project.yaml``: the single source of truth for all three layers.

The CDK app (``stacks/``), the cdk8s app (``charts/``) and the training launcher
(``training/``) all read a :class:`ProjectConfig`. Every field has a documented default;
validation happens on load and errors name the field, the bad value and what is allowed.

One module per section, mirroring what it configures: ``aws``, ``network``, ``cluster`` (and ``helm``), ``nodes``
(``gpu_nodes``), ``storage``, ``image``, ``observability``, ``job`` (and ``dataset_prep``), ``training`` (``model``,
``train``, ``checkpoint``), ``resilience`` (``inprocess``, ``ft``, ``faults``), ``local``; ``project`` holds the root
and the checks across sections, ``modes`` the recovery modes. This package re-exports them all.
"""

from __future__ import annotations

from platform_config.schema.aws import AwsConfig
from platform_config.schema.cluster import ClusterConfig, HelmConfig
from platform_config.schema.image import ImageConfig
from platform_config.schema.job import DatasetPrepConfig, KubernetesJobConfig, RelaunchBudget, RendezvousConfig
from platform_config.schema.local import LocalConfig
from platform_config.schema.modes import MODE_LAYERS, ModeLayers, RecoveryMode
from platform_config.schema.network import NetworkConfig
from platform_config.schema.nodes import CAPACITY_BLOCK_RECLAIM_MINUTES, CapacityConfig, CapacityType, GpuNodesConfig
from platform_config.schema.observability import LLAMA3_NODE_MTBF_HOURS, ObservabilityConfig
from platform_config.schema.project import DOCUMENTATION_CIDRS, ENVIRONMENT_KINDS, ProjectConfig
from platform_config.schema.resilience import FaultConfig, FtLauncherConfig, InprocessConfig, RandomFaults
from platform_config.schema.storage import StorageConfig
from platform_config.schema.training import CheckpointConfig, ModelConfig, TrainConfig

__all__ = [
    "CAPACITY_BLOCK_RECLAIM_MINUTES",
    "DOCUMENTATION_CIDRS",
    "ENVIRONMENT_KINDS",
    "LLAMA3_NODE_MTBF_HOURS",
    "MODE_LAYERS",
    "AwsConfig",
    "CapacityConfig",
    "CapacityType",
    "CheckpointConfig",
    "ClusterConfig",
    "DatasetPrepConfig",
    "FaultConfig",
    "FtLauncherConfig",
    "GpuNodesConfig",
    "HelmConfig",
    "ImageConfig",
    "InprocessConfig",
    "KubernetesJobConfig",
    "LocalConfig",
    "ModeLayers",
    "ModelConfig",
    "NetworkConfig",
    "ObservabilityConfig",
    "ProjectConfig",
    "RandomFaults",
    "RecoveryMode",
    "RelaunchBudget",
    "RendezvousConfig",
    "StorageConfig",
    "TrainConfig",
]
