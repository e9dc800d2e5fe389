"""The recovery modes (``job.mode``) and the layers each turns on."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from platform_config.schema.base import _Strict


class RecoveryMode(StrEnum):
    """The comparison set of the seed article; each maps to a fixed set of layers."""

    SYNC_CKPT = "sync-ckpt"  # synchronous checkpoints, no NVRx restart layer
    ASYNC_CKPT = "async-ckpt"  # asynchronous checkpoints, no NVRx restart layer
    INPROCESS = "inprocess"  # in-process restart (soft faults) + async checkpoints
    FT_LAUNCHER = "ft-launcher"  # ft_launcher in-job restart (hard faults) + async checkpoints
    INPROCESS_FT = "inprocess-ft"  # both NVRx layers + async checkpoints
    K8S_ONLY = "k8s-only"  # the published baseline: Kubernetes replaces pods; no NVRx, no memory tier, sync checkpoints


class ModeLayers(_Strict):
    """What a :class:`RecoveryMode` turns on."""

    checkpoint_mode: Literal["sync", "async"]
    inprocess: bool
    ft_launcher: bool
    #: The host-memory tier (``checkpoint.memory_interval_steps``); off in the published baseline, which restores
    #: from storage only.
    memory_tier: bool = True


MODE_LAYERS: dict[RecoveryMode, ModeLayers] = {
    RecoveryMode.SYNC_CKPT: ModeLayers(checkpoint_mode="sync", inprocess=False, ft_launcher=False),
    RecoveryMode.ASYNC_CKPT: ModeLayers(checkpoint_mode="async", inprocess=False, ft_launcher=False),
    RecoveryMode.INPROCESS: ModeLayers(checkpoint_mode="async", inprocess=True, ft_launcher=False),
    RecoveryMode.FT_LAUNCHER: ModeLayers(checkpoint_mode="async", inprocess=False, ft_launcher=True),
    RecoveryMode.INPROCESS_FT: ModeLayers(checkpoint_mode="async", inprocess=True, ft_launcher=True),
    RecoveryMode.K8S_ONLY: ModeLayers(checkpoint_mode="sync", inprocess=False, ft_launcher=False, memory_tier=False),
}
