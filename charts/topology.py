"""The training job's shape: how many nodes, and the instance-type row that sizes each pod."""

from __future__ import annotations

from dataclasses import dataclass

from platform_config import InstanceType, ProjectConfig


@dataclass(frozen=True)
class Topology:
    """Nodes x GPUs of one training job; one pod per node, one worker process per GPU."""

    nodes: int
    instance: InstanceType

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.instance.gpus < 1:
            raise ValueError(f"instance {self.instance.name} must have >= 1 GPU, got {self.instance.gpus}")

    @classmethod
    def from_config(cls, cfg: ProjectConfig, instance: InstanceType | None = None) -> Topology:
        """``gpu_nodes.node_count`` pods on ``cfg.instance`` (or an explicit instance row, e.g. in tests)."""
        return cls(nodes=cfg.gpu_nodes.node_count, instance=instance or cfg.instance)

    @property
    def nproc_per_node(self) -> int:
        return self.instance.gpus

    @property
    def world_size(self) -> int:
        return self.nodes * self.instance.gpus
