"""The GPU node group (``gpu_nodes``) and how its capacity is bought (``gpu_nodes.capacity``)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import AwareDatetime, Field, field_validator, model_validator

from platform_config.instance_types import INSTANCE_TYPES
from platform_config.schema.base import _Strict

#: EC2 terminates Capacity Block instances 30 minutes before the block ends.
CAPACITY_BLOCK_RECLAIM_MINUTES = 30


class CapacityType(StrEnum):
    """How GPU capacity is bought."""

    ON_DEMAND = "on-demand"
    CAPACITY_RESERVATION = "capacity-reservation"  # an On-Demand Capacity Reservation (ODCR)
    CAPACITY_BLOCK = "capacity-block"  # EC2 Capacity Block for ML


class CapacityConfig(_Strict):
    """How the GPU node group gets instances."""

    type: CapacityType = CapacityType.ON_DEMAND
    reservation_id: str | None = Field(default=None, description="cr-... for capacity-reservation / capacity-block")
    #: Capacity Block start and end (ISO 8601 with a time zone, e.g. ``2027-01-04T11:30:00Z``; required for
    #: ``capacity-block``). The GPU group stays at 0 until ``start`` and is scaled to 0
    #: ``scale_in_minutes_before_end`` before ``end`` by scheduled actions.
    start: AwareDatetime | None = None
    end: AwareDatetime | None = None
    #: Minutes before ``end`` at which the group scales to 0 (EC2 reclaims the instances 30 minutes before the
    #: end; the extra time lets the node termination handler drain pods and training checkpoint).
    scale_in_minutes_before_end: int = Field(default=60, ge=CAPACITY_BLOCK_RECLAIM_MINUTES + 1)
    #: Instances the reservation holds (the ODCR's instance count, the Capacity Block's size): the GPU group's
    #: ``node_count + spare_nodes`` must fit in it, or a spare (or a training node) would never launch.
    reserved_instances: int | None = Field(default=None, ge=1)
    #: Minutes between synthesis and the deploy reaching the GPU stack's scheduled actions (a first deploy creates
    #: the cluster first). A scheduled time closer than this to the planning time could be past when
    #: CloudFormation creates the action, which EC2 Auto Scaling refuses: a scale-in that close is treated as
    #: passed (0 nodes), a block start that close stops synth until the block has started.
    schedule_margin_minutes: int = Field(default=60, ge=0, le=1440)

    @model_validator(mode="after")
    def _reservation(self) -> CapacityConfig:
        needs = self.type in (CapacityType.CAPACITY_RESERVATION, CapacityType.CAPACITY_BLOCK)
        if needs and not (self.reservation_id and re.fullmatch(r"cr-[0-9a-f]{8,17}", self.reservation_id)):
            raise ValueError(f"capacity type {self.type.value!r} needs reservation_id like 'cr-0123456789abcdef0'")
        if not needs and self.reservation_id:
            raise ValueError("reservation_id is only allowed with capacity-reservation or capacity-block")
        if not needs and self.reserved_instances is not None:
            raise ValueError("reserved_instances is only allowed with capacity-reservation or capacity-block")
        block = self.type is CapacityType.CAPACITY_BLOCK
        if block and (self.start is None or self.end is None):
            raise ValueError(
                "capacity type 'capacity-block' needs start and end (the block's times, e.g. 2027-01-04T11:30:00Z)"
            )
        if not block and (self.start is not None or self.end is not None):
            raise ValueError("start/end are only allowed with capacity-block")
        if block and self.scale_in_at <= self.start:  # type: ignore[operator]
            raise ValueError(
                f"end {self.end.isoformat()} minus scale_in_minutes_before_end ({self.scale_in_minutes_before_end}) "  # type: ignore[union-attr]
                f"must be after start {self.start.isoformat()}"  # type: ignore[union-attr]
            )
        return self

    @property
    def scale_in_at(self) -> datetime | None:
        """When a Capacity Block group scales to 0 (``end - scale_in_minutes_before_end``)."""
        if self.end is None:
            return None
        return self.end - timedelta(minutes=self.scale_in_minutes_before_end)

    @property
    def placement_group(self) -> bool:
        """Only on-demand capacity gets this project's cluster placement group: a Capacity Block is already
        co-located, and an ODCR decides its own placement (an instance in a placement group can only use a
        reservation made in that group)."""
        return self.type is CapacityType.ON_DEMAND


_TAINT_RE = re.compile(r"[A-Za-z0-9./_-]+(=[A-Za-z0-9._-]*)?:(NoSchedule|PreferNoSchedule|NoExecute)")


class GpuNodesConfig(_Strict):
    """The self-managed GPU node group and the training pods placed on it."""

    instance_type: str = "p5.48xlarge"
    node_count: int = Field(default=2, ge=1, le=512, description="training pods (one per node)")
    #: Nodes the group keeps beyond ``node_count``, idle until a node fails: the lost pod's replacement schedules on
    #: one at once instead of waiting for a new instance (10+ minutes for a p5). 0 here; at least 1 for a long run
    #: (docs/kubernetes.md). The group's desired size is ``node_count + spare_nodes``.
    spare_nodes: int = Field(default=0, ge=0)
    min_nodes: int = Field(default=0, ge=0)
    max_nodes: int = Field(default=2, ge=1)
    capacity: CapacityConfig = Field(default_factory=CapacityConfig)
    root_volume_gib: int = Field(default=500, ge=100, le=16384)
    node_labels: dict[str, str] = Field(default_factory=lambda: {"workload": "training", "node-group": "gpu-efa"})
    #: Taints the GPU nodes register with, ``key[=value]:Effect`` (written into the NodeConfig's kubelet
    #: ``registerWithTaints``); the training pods tolerate exactly these.
    node_taints: list[str] = Field(default_factory=lambda: ["nvidia.com/gpu=true:NoSchedule"])
    #: Release of the EKS-optimized AL2023 NVIDIA AMI, ``vYYYYMMDD`` (e.g. ``v20261115``; the AMI
    #: ``amazon-eks-node-al2023-x86_64-nvidia-<k8s>-<release>``), read at deploy from its release-specific SSM
    #: parameter, so that a new AMI reaches the nodes only through an edit of this field (docs/deploy.md). Required
    #: with ``environment_kind: deploy``; None (demo only) follows ``recommended/image_id``, which rolls every node
    #: on the first deploy after AWS publishes a new AMI.
    ami_release: str | None = Field(default=None, pattern=r"^v\d{8}$")

    @field_validator("node_taints")
    @classmethod
    def _taints(cls, v: list[str]) -> list[str]:
        for taint in v:
            if not _TAINT_RE.fullmatch(taint):
                raise ValueError(
                    f"bad taint {taint!r}; expected key[=value]:Effect (NoSchedule|PreferNoSchedule|NoExecute)"
                )
        return v

    @field_validator("instance_type")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in INSTANCE_TYPES:
            raise ValueError(f"not in the instance-type table; allowed: {', '.join(sorted(INSTANCE_TYPES))}")
        return v

    @property
    def group_size(self) -> int:
        """Nodes the Auto Scaling group runs: the training pods' and the spares."""
        return self.node_count + self.spare_nodes

    @model_validator(mode="after")
    def _bounds(self) -> GpuNodesConfig:
        if not self.min_nodes <= self.node_count <= self.group_size <= self.max_nodes:
            raise ValueError(
                "need min_nodes <= node_count <= node_count + spare_nodes <= max_nodes, got "
                f"{self.min_nodes} <= {self.node_count} <= {self.group_size} <= {self.max_nodes}"
            )
        reserved = self.capacity.reserved_instances
        if reserved is not None and self.group_size > reserved:
            raise ValueError(
                f"node_count + spare_nodes = {self.node_count} + {self.spare_nodes} = {self.group_size} exceeds "
                f"capacity.reserved_instances = {reserved}: the reservation cannot hold every training node and spare"
            )
        if self.capacity.type is CapacityType.CAPACITY_BLOCK and self.min_nodes != 0:
            raise ValueError(
                f"min_nodes must be 0 with a Capacity Block (got {self.min_nodes}): instances cannot launch before "
                "the block starts, and the group scales to 0 before it ends"
            )
        return self
