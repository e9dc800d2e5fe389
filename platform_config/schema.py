"""Typed schema of ``project.yaml``: the single source of truth for all three layers.

The CDK app (``stacks/``), the cdk8s app (``charts/``) and the training launcher
(``training/``) all read a :class:`ProjectConfig`. Every field has a documented default;
validation happens on load and errors name the field, the bad value and what is allowed.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from platform_config.instance_types import INSTANCE_TYPES, system_instance_type
from platform_config.versions import (
    DEFAULT_ADDON_VERSIONS,
    DEFAULT_KUBERNETES_VERSION,
    MANAGED_ADDONS,
    SUPPORTED_KUBERNETES_MINORS,
    supported_versions_text,
)

#: Documentation address blocks (RFC 5737): a public endpoint restricted to them admits nobody.
DOCUMENTATION_CIDRS = ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
#: ``environment_kind`` values: ``demo`` synthesizes offline with placeholders and is refused by CloudFormation at
#: deploy; ``deploy`` requires real access settings (``cluster.admin_principal_arn``, no documentation CIDRs).
ENVIRONMENT_KINDS = ("demo", "deploy")
#: EC2 terminates Capacity Block instances 30 minutes before the block ends.
CAPACITY_BLOCK_RECLAIM_MINUTES = 30
_IAM_PRINCIPAL_ARN = re.compile(r"arn:aws(-cn|-us-gov)?:iam::\d{12}:(role|user)/[\w+=,.@/-]+")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class CapacityType(StrEnum):
    """How GPU capacity is bought."""

    ON_DEMAND = "on-demand"
    CAPACITY_RESERVATION = "capacity-reservation"  # an On-Demand Capacity Reservation (ODCR)
    CAPACITY_BLOCK = "capacity-block"  # EC2 Capacity Block for ML


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


class AwsConfig(_Strict):
    """Where the stack is deployed."""

    account: str | None = Field(
        default=None, description="12-digit account id; None = the CLI's default account at deploy time."
    )
    region: str = "us-east-1"
    availability_zone: str = Field(
        default="us-east-1a", description="AZ that holds the GPU capacity; GPU nodes and FSx live here."
    )

    @field_validator("account")
    @classmethod
    def _account(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"\d{12}", v):
            raise ValueError("must be a 12-digit AWS account id or null")
        return v

    @model_validator(mode="after")
    def _az_in_region(self) -> AwsConfig:
        if not self.availability_zone.startswith(self.region) or len(self.availability_zone) != len(self.region) + 1:
            raise ValueError(
                f"availability_zone {self.availability_zone!r} is not an AZ of region {self.region!r} "
                f"(expected e.g. {self.region}a)"
            )
        return self


class NetworkConfig(_Strict):
    """Either a new VPC (``vpc_id`` unset) or an existing one imported by id (no lookups)."""

    vpc_id: str | None = None
    vpc_cidr: str = "10.0.0.0/16"
    #: Existing private subnets: id -> AZ. Required with ``vpc_id``; no synth-time lookups.
    private_subnets: dict[str, str] = Field(default_factory=dict)
    #: Route-table id per existing subnet id (optional; CDK warns without it).
    route_tables: dict[str, str] = Field(default_factory=dict)
    #: The subnet (one of ``private_subnets``) for GPU nodes and FSx; must be in ``aws.availability_zone``.
    gpu_subnet_id: str | None = None
    nat_gateways: int = Field(default=1, ge=1, le=3)

    @model_validator(mode="after")
    def _existing(self) -> NetworkConfig:
        if self.vpc_id is None:
            if self.private_subnets or self.gpu_subnet_id:
                raise ValueError("private_subnets/gpu_subnet_id need vpc_id (an existing VPC)")
            return self
        if not self.private_subnets:
            raise ValueError("vpc_id is set, so private_subnets (subnet id -> AZ) is required")
        if self.gpu_subnet_id not in self.private_subnets:
            raise ValueError(
                f"gpu_subnet_id {self.gpu_subnet_id!r} must be one of private_subnets "
                f"({', '.join(self.private_subnets)})"
            )
        return self


class ClusterConfig(_Strict):
    """The EKS control plane."""

    name: str = Field(default="fsdp-resilience", pattern=r"^[A-Za-z][A-Za-z0-9-]{0,99}$")
    #: One of ``platform_config.versions.SUPPORTED_KUBERNETES_MINORS`` (1.32 .. 1.36).
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    endpoint_access: Literal["private", "public"] = "public"
    #: CIDRs allowed to reach a public endpoint. Empty with ``public`` is rejected; documentation ranges
    #: (RFC 5737, the demo's 203.0.113.0/24) are rejected outside ``environment_kind: demo``.
    public_access_cidrs: list[str] = Field(default_factory=lambda: ["203.0.113.0/24"])
    #: IAM role or user ARN given cluster-admin through an access entry: the identity you run kubectl with.
    #: Required outside ``environment_kind: demo`` (without it nobody can use kubectl after deploy).
    admin_principal_arn: str | None = None
    #: Managed node group for CoreDNS, controllers and the dataset-preparation Job (``<family>.<size>`` of
    #: ``platform_config.instance_types.SYSTEM_FAMILIES``).
    system_node_instance_type: str = "m6i.xlarge"
    system_node_count: int = Field(default=2, ge=1, le=10)
    #: Kubernetes labels of the system nodes (the dataset-preparation Job selects them).
    system_node_labels: dict[str, str] = Field(default_factory=lambda: {"node-group": "system"})
    #: EKS managed add-on versions, add-on name -> version (``v1.2.3-eksbuild.N``). Every add-on is pinned: the
    #: defaults for ``kubernetes_version`` come from ``platform_config.versions.DEFAULT_ADDON_VERSIONS``, entries
    #: given here replace single add-ons. kube-proxy must match the cluster minor; vpc-cni must be >= 1.18.5.
    addon_versions: dict[str, str] = Field(default_factory=dict)
    #: Kubernetes service IPv4 CIDR (EKS allows /12../24 in 10/8, 172.16/12 or 192.168/16); GPU nodes'
    #: NodeConfig carries it, so it is fixed here rather than left to EKS. Must not overlap network.vpc_cidr.
    service_ipv4_cidr: str = "172.20.0.0/16"

    @model_validator(mode="before")
    @classmethod
    def _pin_addons(cls, data: Any) -> Any:
        """Fill ``addon_versions`` with the pins of the configured Kubernetes minor (single entries override)."""
        if not isinstance(data, dict):
            return data
        m = re.fullmatch(r"1\.(\d+)", str(data.get("kubernetes_version", DEFAULT_KUBERNETES_VERSION)))
        default_minor = int(DEFAULT_KUBERNETES_VERSION.split(".")[1])
        # An unsupported version is reported by its own validator; the default minor's pins keep this one quiet.
        defaults = DEFAULT_ADDON_VERSIONS.get(
            int(m.group(1)) if m else default_minor, DEFAULT_ADDON_VERSIONS[default_minor]
        )
        given = data.get("addon_versions") or {}
        if not isinstance(given, dict):
            return data
        return {**data, "addon_versions": {**defaults, **given}}

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        m = re.fullmatch(r"1\.(\d+)", v)
        if not m:
            raise ValueError("must look like '1.NN'")
        if int(m.group(1)) not in SUPPORTED_KUBERNETES_MINORS:
            raise ValueError(
                f"must be one of {supported_versions_text()} (default {DEFAULT_KUBERNETES_VERSION}): the versions "
                "EKS still supports that have a pinned kubectl layer and pinned add-on versions"
            )
        return v

    @field_validator("admin_principal_arn")
    @classmethod
    def _admin(cls, v: str | None) -> str | None:
        if v is not None and not _IAM_PRINCIPAL_ARN.fullmatch(v):
            raise ValueError(
                "must be an IAM role or user ARN like 'arn:aws:iam::111122223333:role/Admin' "
                "(for an assumed-role session use the role's ARN, not the sts session ARN)"
            )
        return v

    @field_validator("system_node_instance_type")
    @classmethod
    def _system_type(cls, v: str) -> str:
        system_instance_type(v)
        return v

    @field_validator("addon_versions")
    @classmethod
    def _addons(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = set(v) - set(MANAGED_ADDONS)
        if unknown:
            raise ValueError(f"unknown add-on(s) {sorted(unknown)}; allowed: {', '.join(MANAGED_ADDONS)}")
        missing = [name for name in MANAGED_ADDONS if name not in v]
        if missing:
            raise ValueError(f"every add-on must be pinned; missing {missing}")
        for name, version in v.items():
            if not re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", version):
                raise ValueError(f"{name} version {version!r} must look like 'v1.2.3-eksbuild.1'")
        if _semver(v["vpc-cni"][1:].split("-")[0]) < (1, 18, 5):
            raise ValueError("vpc-cni must be >= v1.18.5 (efa-only network interfaces)")
        return v

    @field_validator("service_ipv4_cidr")
    @classmethod
    def _service_cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 CIDR: {exc}") from None
        allowed = [ipaddress.IPv4Network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
        if not (12 <= net.prefixlen <= 24 and any(net.subnet_of(a) for a in allowed)):
            raise ValueError("must be a /12../24 block inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
        return v

    @model_validator(mode="after")
    def _cidrs(self) -> ClusterConfig:
        if self.endpoint_access == "public" and not self.public_access_cidrs:
            raise ValueError("endpoint_access 'public' needs at least one public_access_cidrs entry")
        for cidr in self.public_access_cidrs:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError as exc:
                raise ValueError(f"public_access_cidrs entry {cidr!r} is not an IPv4 CIDR: {exc}") from None
        proxy_minor = self.addon_versions["kube-proxy"].split(".")[1]
        if f"1.{proxy_minor}" != self.kubernetes_version:
            raise ValueError(
                f"addon_versions kube-proxy {self.addon_versions['kube-proxy']!r} is for Kubernetes 1.{proxy_minor}, "
                f"not kubernetes_version {self.kubernetes_version!r} (kube-proxy must match the cluster minor)"
            )
        return self

    @property
    def minor(self) -> int:
        return int(self.kubernetes_version.split(".")[1])


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

    @model_validator(mode="after")
    def _reservation(self) -> CapacityConfig:
        needs = self.type in (CapacityType.CAPACITY_RESERVATION, CapacityType.CAPACITY_BLOCK)
        if needs and not (self.reservation_id and re.fullmatch(r"cr-[0-9a-f]{8,17}", self.reservation_id)):
            raise ValueError(f"capacity type {self.type.value!r} needs reservation_id like 'cr-0123456789abcdef0'")
        if not needs and self.reservation_id:
            raise ValueError("reservation_id is only allowed with capacity-reservation or capacity-block")
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
        if self.capacity.type is CapacityType.CAPACITY_BLOCK and self.min_nodes != 0:
            raise ValueError(
                f"min_nodes must be 0 with a Capacity Block (got {self.min_nodes}): instances cannot launch before "
                "the block starts, and the group scales to 0 before it ends"
            )
        return self


class StorageConfig(_Strict):
    """FSx for Lustre SCRATCH_2 for checkpoints and data."""

    fsx_capacity_gib: int = 1200
    lustre_version: Literal["2.15"] = "2.15"
    mount_path: str = "/checkpoints"
    #: Static PersistentVolume / PersistentVolumeClaim names (PV made by the CDK app, claim used by the charts).
    pv_name: str = "fsx-lustre-pv"
    pvc_name: str = "fsx-lustre"

    @field_validator("fsx_capacity_gib")
    @classmethod
    def _capacity(cls, v: int) -> int:
        if v != 1200 and (v < 2400 or v % 2400):
            raise ValueError("SCRATCH_2 allows 1200, 2400, then multiples of 2400 GiB")
        return v


#: Registries whose pulls need a login that a CDK Docker asset build does not perform (it logs in only to the
#: bootstrap repository, aws/aws-cdk#17268): private ECR, which includes the AWS Deep Learning Containers.
_PRIVATE_REGISTRY = re.compile(r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/")


class ImageConfig(_Strict):
    """The training container image: ``training/Dockerfile``, built as a CDK asset (docs/image.md).

    Every layer is pinned here or in ``image/requirements.txt`` (the hashed lock of the image's Python packages);
    the Dockerfile checks the versions below at build time and fails loudly on a mismatch.
    """

    #: Base image (public registry, explicit tag or digest): CUDA 13.0 user space on Ubuntu 24.04 (glibc 2.39).
    base_image: str = "nvcr.io/nvidia/cuda:13.0.2-base-ubuntu24.04"
    #: snapshot.ubuntu.com timestamp the image's apt packages are installed from (``YYYYMMDDTHHMMSSZ``).
    ubuntu_snapshot: str = Field(default="20261115T000000Z", pattern=r"^\d{8}T\d{6}Z$")
    #: Python of the image (Ubuntu 24.04's python3) and the wheel tag ``make check-image`` resolves for.
    python_version: Literal["3.12"] = "3.12"
    #: PyPI torch (its wheel carries CUDA 13.0 user-space libraries and NCCL): what the GPU runs proved.
    torch_version: str = "2.11.0"
    cuda_version: str = "13.0"
    nccl_version: str = "2.28.9"
    nvrx_version: str = "0.7.0"
    #: AWS EFA installer (libfabric with the efa provider, rdma-core, aws-ofi-nccl), verified by its GPG signature.
    efa_installer_version: str = "1.50.0"
    #: The aws-ofi-nccl release that ``efa_installer_version`` ships (checked at build time).
    aws_ofi_nccl_version: str = "1.21.1"
    #: Use a prebuilt image instead of the CDK asset (None = build the asset).
    uri_override: str | None = None

    @field_validator("base_image")
    @classmethod
    def _base(cls, v: str) -> str:
        if _PRIVATE_REGISTRY.match(v):
            raise ValueError(
                "is in a private ECR registry, whose pull needs a login that the CDK asset build does not perform "
                "(aws/aws-cdk#17268); use a public base (nvcr.io, public.ecr.aws, docker.io) or build elsewhere "
                "and set image.uri_override"
            )
        name = v.rsplit("/", 1)[-1]
        if "@sha256:" not in v and (":" not in name or name.endswith(":latest")):
            raise ValueError("must name an explicit tag (not latest) or a @sha256: digest")
        return v


class HelmConfig(_Strict):
    """Pinned Helm chart versions (every chart the CDK app installs)."""

    nvidia_device_plugin: str = "0.19.3"
    #: aws/eks-charts publishes this chart's versions with a leading ``v``.
    efa_device_plugin: str = "v0.5.30"
    #: aws-node-termination-handler (queue processor), from oci://public.ecr.aws/aws-ec2/helm.
    node_termination_handler: str = "0.27.6"

    @field_validator("nvidia_device_plugin")
    @classmethod
    def _nvidia(cls, v: str) -> str:
        if _semver(v) < (0, 19, 3):
            raise ValueError("must be >= 0.19.3 (0.19.0-0.19.2 enable MOFED, which conflicts with the EFA plugin)")
        return v

    @field_validator("efa_device_plugin")
    @classmethod
    def _efa(cls, v: str) -> str:
        if _semver(v.removeprefix("v")) < (0, 5, 10):
            raise ValueError("must be >= v0.5.10")
        return v

    @field_validator("node_termination_handler")
    @classmethod
    def _nth(cls, v: str) -> str:
        _semver(v)
        return v


class DatasetPrepConfig(_Strict):
    """The dataset-preparation Job (runs on the system nodes, before training)."""

    #: CPU cores and memory requested (= limits). Must fit in half a system node: the rest is for the node's
    #: DaemonSets, CoreDNS and the controllers.
    cpu: float = Field(default=2.0, gt=0)
    memory_gib: int = Field(default=8, ge=1)
    #: The Job fails after this long (``activeDeadlineSeconds``); ``make submit`` waits this long for it.
    active_deadline_seconds: int = Field(default=7200, ge=60)


#: Node MTBF from Llama 3 (arXiv 2407.21783, Table 5): 2,048 nodes x 54 days x 24 h / 419 unexpected interruptions.
LLAMA3_NODE_MTBF_HOURS = 2048 * 54 * 24 / 419


class ObservabilityConfig(_Strict):
    """CloudWatch metrics and alarms."""

    emf_metrics: bool = False  # training prints CloudWatch embedded-metric-format lines
    metric_namespace: str = "FsdpResilience"
    alarm_restarts_per_window: int = Field(default=3, ge=1)
    alarm_window_minutes: int = Field(default=30, ge=1)
    alarm_stale_checkpoint_minutes: int = Field(default=60, ge=1)
    #: Mean time between failures of one node, in hours: the job's MTBF is this / its node count. The goodput
    #: report's checkpoint-interval advice (Young/Daly) and the goodput planner use it. Default: Llama 3's 2,048
    #: nodes x 54 days / 419 unexpected interruptions (arXiv 2407.21783, Table 5) = 6,335 h. None: no prior; the
    #: advice then measures it from the run's faults (and warns when those were all injected).
    node_mtbf_hours: float | None = Field(default=LLAMA3_NODE_MTBF_HOURS, gt=0)


class RendezvousConfig(_Strict):
    """The c10d rendezvous every launcher uses (hosted by the launcher of completion index 0)."""

    #: How long a launcher waits for every node to join a round (a replacement node included) before it gives up.
    join_timeout_s: float = Field(default=600.0, gt=0)
    #: How long one request to the rendezvous store may block: after a silent loss of the store's host (index 0)
    #: the other launchers notice within this time, then their supervisors relaunch them to rejoin the new host.
    read_timeout_s: float = Field(default=60.0, gt=0)
    #: After the minimum number of nodes joined, wait this long for more. Every launcher here asks for min = max
    #: nodes, so a round completes once all joined and this never delays a restart; torch's c10d handler needs a
    #: whole number of seconds > 0 (NVRx 0.7's barrier rendezvous applies it only to restart rounds with min < max).
    last_call_timeout_s: float = Field(default=1.0, ge=0)
    close_timeout_s: float = Field(default=30.0, gt=0)


class RelaunchBudget(_Strict):
    """How often a pod's supervisor may relaunch its launcher in place, counted in a sliding window.

    A relaunch follows a lost peer (another pod failed, or the rendezvous host went away) or, with ft_launcher, a
    launcher whose own restarts are used up. Counting within a window limits the fault *rate*, so a long run with
    rare faults never runs out; more than ``max_in_window`` relaunches within ``window_s`` ends the pod with the
    unrecoverable exit code (the Job fails, with the reason in the pod's log and ``exit_status.json``).
    """

    max_in_window: int = Field(default=10, ge=0)
    window_s: float = Field(default=3600.0, gt=0)
    #: Pause before a relaunch (lets the failed launcher's processes and sockets go away).
    delay_s: float = Field(default=1.0, ge=0)


class KubernetesJobConfig(_Strict):
    """The training Job's Kubernetes settings."""

    namespace: str = "training"
    job_name: str = "fsdp-train"
    service_account: str = "training"
    mode: RecoveryMode = RecoveryMode.INPROCESS_FT
    rendezvous_port: int = Field(default=29500, ge=1024, le=65535)
    inprocess_store_port: int = Field(default=29600, ge=1024, le=65535)
    #: Counted pod failures allowed per completion index (``backoffLimitPerIndex``). A lost node or an eviction
    #: is not counted (``DisruptionTarget`` -> Ignore), nor is a lost peer (the supervisor relaunches in place).
    backoff_limit: int = Field(default=3, ge=0, description="counted pod failures allowed per index")
    rendezvous: RendezvousConfig = Field(default_factory=RendezvousConfig)
    relaunch: RelaunchBudget = Field(default_factory=RelaunchBudget)
    #: Workers are forked by a per-pod template that imported the training code once (``training.launch.prefork``),
    #: so no worker start (a first launch, an ft_launcher restart, a relaunch) pays those imports; False: every
    #: worker is a fresh ``python -m training.train``.
    prefork_workers: bool = True
    #: ``tolerationSeconds`` for the ``node.kubernetes.io/not-ready`` and ``unreachable`` NoExecute taints: how long a
    #: training pod stays bound to a node that stopped answering before it is evicted (Kubernetes' default is 300 s;
    #: NCCL peers give up long before, so waiting longer only delays the replacement).
    node_failure_toleration_s: int = Field(default=60, ge=0)
    ttl_seconds_after_finished: int = Field(default=86400, ge=0)
    shm_size_gib: int = Field(default=64, ge=1)

    @model_validator(mode="after")
    def _ports(self) -> KubernetesJobConfig:
        if self.inprocess_store_port == self.rendezvous_port:
            raise ValueError("inprocess_store_port must differ from rendezvous_port")
        return self


class ModelConfig(_Strict):
    """The Llama-style decoder."""

    size: Literal["tiny", "small", "1b", "llama3-8b"] = "tiny"
    #: A local Hugging Face Llama directory (``config.json`` + ``*.safetensors``, e.g. on FSx): its shape replaces
    #: ``size``, and its weights start a run that has no committed checkpoint (training/model/hf_checkpoint.py).
    hf_checkpoint: str | None = None


class TrainConfig(_Strict):
    """Optimisation hyper-parameters."""

    steps: int = Field(default=200, ge=1)
    seq_len: int = Field(default=128, ge=8)
    micro_batch_size: int = Field(default=4, ge=1)
    lr: float = Field(default=3e-3, gt=0)
    min_lr: float = Field(default=3e-4, ge=0)
    warmup_steps: int = Field(default=20, ge=0)
    weight_decay: float = Field(default=0.1, ge=0)
    grad_clip: float = Field(default=1.0, gt=0)
    seed: int = 1234
    eval_interval: int = Field(default=50, ge=0, description="0 = no evaluation")
    eval_batches: int = Field(default=2, ge=1)
    data_dir: str | None = Field(default=None, description="tokenized shards; None = generate the offline corpus")
    #: Raw text for the dataset-preparation Job (text / JSON-lines files or a directory on the shared file system,
    #: e.g. a C4 subset copied to FSx). None = the Job writes the project's generated corpus instead.
    corpus_source: str | None = None
    #: Size of the generated corpus (MB) when ``corpus_source`` is unset.
    generated_corpus_mb: float = Field(default=64.0, gt=0)


class CheckpointConfig(_Strict):
    """Checkpoint cadence and retention (mode comes from the recovery mode)."""

    interval_steps: int = Field(default=25, ge=1)
    #: Steps between host-memory snapshots (the memory tier: page-locked host buffers backed by ``/dev/shm``, each
    #: rank's snapshot also copied to a rank on the next node). An in-process restart, an ft_launcher restart and a
    #: lost node (while one replica survives) roll back at most this many steps instead of to the last storage
    #: checkpoint. 0 = off (storage only); always off in mode ``k8s-only`` (the published baseline). Host memory per
    #: rank: 4 x its shard of the state (2 own slots, 2 peer).
    memory_interval_steps: int = Field(default=5, ge=0)
    keep_last: int = Field(default=3, ge=1)
    #: Root directory for checkpoints; None = ``<run_dir>/checkpoints`` locally, the FSx mount on Kubernetes.
    dir: str | None = None
    #: How NVRx's async path (CUDA only) hands GPU tensors to its writer process: ``cuda-ipc`` (NVRx's
    #: default: CUDA IPC handles, copied to host in the worker), ``cpu-shm`` (the trainer copies into shared
    #: host memory; no CUDA in the worker); ``-cached`` reuses handles/buffers across saves. See
    #: docs/benchmarks.md for the measured stall of each.
    nvrx_staging: Literal["cuda-ipc", "cuda-ipc-cached", "cpu-shm", "cpu-shm-cached"] = "cuda-ipc"
    #: Writer processes per rank in NVRx's async path (its ``thread_count``: one file and one forked writer each,
    #: so a rank's share is written in parallel); the commit hashes those files in as many threads. 4: a 1B
    #: checkpoint (11.7 GB) committed in 12.3-13.0 s on an H200 host, against 28.5-32.8 s with 1 (docs/benchmarks.md).
    write_threads: int = Field(default=4, ge=1, le=32)


class InprocessConfig(_Strict):
    """NVRx in-process restart timeouts (soft < hard < barrier, enforced)."""

    soft_timeout_s: float = Field(default=20.0, gt=0)
    hard_timeout_s: float = Field(default=30.0, gt=0)
    heartbeat_interval_s: float = Field(default=2.0, gt=0)
    heartbeat_timeout_s: float = Field(default=30.0, gt=0)
    barrier_timeout_s: float = Field(default=60.0, gt=0)
    completion_timeout_s: float = Field(default=60.0, gt=0)
    #: In-process restarts allowed within ``restart_window_s`` (a sliding window, so a long run with rare faults
    #: never runs out). Beyond it the in-process layer gives up on this fault and the next layer takes over
    #: (ft_launcher, or the pod's end under torchrun), never failing the Job by itself.
    max_iterations: int = Field(default=8, ge=1)
    restart_window_s: float = Field(default=3600.0, gt=0)
    #: Smallest world the in-process layer may continue with after ranks are lost. None = the full world: a lost
    #: rank (a dead pod) ends the iteration on every survivor with PEER_LOST, and the pods rejoin at full size once
    #: the lost one is replaced, so the run stays bitwise what a fault-free run computes. A smaller value lets the
    #: survivors go on with fewer ranks (a different global batch; the checkpoint loader reshards).
    min_world_size: int | None = Field(default=None, ge=1)
    #: Deadline of gloo collectives: the checkpoint group's on every device, the default group's on CPU. Below
    #: hard_timeout_s (NVRx cannot abort gloo).
    gloo_timeout_s: float = Field(default=10.0, gt=0)
    #: NVRx's monitor thread (in the worker): how often it re-arms its wait for an interruption record in the store.
    #: The wait returns as soon as a record appears, so this does not delay detection.
    monitor_thread_interval_s: float = Field(default=1.0, gt=0)
    #: NVRx's monitor process: how often it checks the progress timestamps against the soft and hard timeouts. It
    #: skips that check after every timestamp message it receives (docs/nvrx-monitor.md), so it must be well below
    #: ``progress_watchdog_interval_s`` (at most half of it, enforced), or the checks run rarely and a hang is caught
    #: many seconds after the soft timeout.
    monitor_process_interval_s: float = Field(default=0.1, gt=0)
    #: NVRx's progress watchdog: how often it samples the main thread's automatic progress timestamp and sends it to
    #: the monitor process (one message each time).
    progress_watchdog_interval_s: float = Field(default=1.0, gt=0)
    #: The soft timeout of a training step is derived from the measured step time (the longest gap between two
    #: step pings of the last ``training.resilience.hang.WINDOW`` steps) times this factor, at least
    #: ``step_timeout_floor_s`` and at most ``soft_timeout_s`` (the ceiling). The hard timeout moves with it: it stays
    #: ``hard_timeout_s - soft_timeout_s`` after the derived soft timeout.
    step_timeout_factor: float = Field(default=10.0, ge=1.0)
    #: Lower bound of the derived step soft timeout: a slow step (a first step after a restart, a step competing with a
    #: background checkpoint write) must not look like a hang. Set-up, restore and checkpoints are not measured against
    #: it; they keep ``soft_timeout_s``.
    step_timeout_floor_s: float = Field(default=3.0, gt=0)
    #: Wait for other ranks to report concurrent faults before restarting (on every in-process restart's path).
    last_call_wait_s: float = Field(default=0.2, gt=0)
    #: SIGTERM -> SIGKILL grace used by the hard timeout.
    termination_grace_s: float = Field(default=5.0, gt=0)
    #: FaultCounter: faults one rank may have before it is excluded (None = unlimited).
    max_rank_faults: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _order(self) -> InprocessConfig:
        if not self.soft_timeout_s < self.hard_timeout_s < self.barrier_timeout_s:
            raise ValueError(
                "NVRx needs soft_timeout_s < hard_timeout_s < barrier_timeout_s, got "
                f"{self.soft_timeout_s} / {self.hard_timeout_s} / {self.barrier_timeout_s}"
            )
        if self.gloo_timeout_s >= self.hard_timeout_s:
            raise ValueError(
                f"gloo_timeout_s ({self.gloo_timeout_s}) must be below hard_timeout_s ({self.hard_timeout_s}): NVRx "
                "cannot abort a gloo collective (the checkpoint group's, and every group's on CPU), so a rank blocked "
                "in one must leave it before the hard timeout kills the process"
            )
        if self.heartbeat_interval_s >= self.heartbeat_timeout_s:
            raise ValueError("heartbeat_interval_s must be below heartbeat_timeout_s")
        if self.heartbeat_timeout_s >= self.barrier_timeout_s:
            raise ValueError("NVRx needs heartbeat_timeout_s < barrier_timeout_s")
        for name in ("monitor_thread_interval_s", "monitor_process_interval_s", "progress_watchdog_interval_s"):
            if getattr(self, name) >= min(self.soft_timeout_s, self.heartbeat_timeout_s):
                raise ValueError(f"{name} must be below soft_timeout_s and heartbeat_timeout_s")
        if 2 * self.monitor_process_interval_s > self.progress_watchdog_interval_s:
            raise ValueError(
                f"monitor_process_interval_s ({self.monitor_process_interval_s}) must be at most half of "
                f"progress_watchdog_interval_s ({self.progress_watchdog_interval_s}): NVRx's monitor process skips its "
                "timeout checks after every progress message, so with similar intervals it checks only now and then "
                "and a hang is caught long after the soft timeout (docs/nvrx-monitor.md)"
            )
        if self.step_timeout_floor_s > self.soft_timeout_s:
            raise ValueError(
                f"step_timeout_floor_s ({self.step_timeout_floor_s}) must not exceed soft_timeout_s "
                f"({self.soft_timeout_s}), the ceiling of the derived step timeout"
            )
        return self


class FtLauncherConfig(_Strict):
    """NVRx fault-tolerance launcher (ft_launcher) settings."""

    initial_rank_heartbeat_timeout_s: float = Field(default=120.0, gt=0)
    rank_heartbeat_timeout_s: float = Field(default=60.0, gt=0)
    section_timeouts_s: dict[str, float] = Field(
        default_factory=lambda: {"setup": 300.0, "step": 120.0, "checkpoint": 300.0}
    )
    rank_out_of_section_timeout_s: float = Field(default=300.0, gt=0)
    max_restarts: int = Field(default=5, ge=0)
    #: Seconds between the launcher's worker-liveness checks (how fast a killed worker is noticed).
    monitor_interval_s: float = Field(default=0.5, gt=0)
    #: Let NVRx compute heartbeat/section timeouts from observed times (at checkpoints); they are then
    #: stored in the checkpoint. Off = the configured values above are used as they are.
    calculate_timeouts: bool = False
    #: Exit code meaning "retries exhausted / unrecoverable": the Job fails at once, no pod restart.
    unrecoverable_exit_code: int = Field(default=42, ge=1, le=255)

    @field_validator("section_timeouts_s")
    @classmethod
    def _sections(cls, v: dict[str, float]) -> dict[str, float]:
        missing = {"setup", "step", "checkpoint"} - set(v)
        if missing:
            raise ValueError(f"needs sections setup, step and checkpoint; missing {sorted(missing)}")
        if any(t <= 0 for t in v.values()):
            raise ValueError("section timeouts must be positive")
        return v


class RandomFaults(_Strict):
    """Seeded random fault schedule."""

    count: int = Field(default=0, ge=0)
    kinds: list[Literal["exception", "hang", "sigkill", "oom", "comm"]] = Field(
        default_factory=lambda: ["exception", "sigkill"]
    )
    weights: list[float] | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _weights(self) -> RandomFaults:
        if self.weights is not None and len(self.weights) != len(self.kinds):
            raise ValueError(f"weights has {len(self.weights)} entries but kinds has {len(self.kinds)}")
        return self


#: ``kind@step[:rank][/phase][!]``; ``!`` = sticky (fires again after every recovery: a deterministic bug).
_FAULT_RE = re.compile(r"^(exception|hang|sigkill|oom|comm)@\d+(:\d+)?(/(init|step|checkpoint|restore|eval))?!?$")


class FaultConfig(_Strict):
    """Fault injection: an explicit ``kind@step[:rank][/phase][!]`` schedule and/or seeded random faults."""

    schedule: str = ""
    random: RandomFaults = Field(default_factory=RandomFaults)
    #: Same fault (kind, step, rank) seen this many times escalates to the unrecoverable exit.
    max_repeats: int = Field(default=3, ge=1)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        for item in filter(None, (s.strip() for s in v.split(","))):
            if not _FAULT_RE.match(item):
                raise ValueError(
                    f"bad entry {item!r}; expected kind@step[:rank][/phase][!] with kind in "
                    "exception|hang|sigkill|oom|comm and phase in init|step|checkpoint|restore|eval"
                )
        return v


class LocalConfig(_Strict):
    """The local CPU run (``python -m training.local``, ``make demo``)."""

    nproc: int = Field(default=2, ge=1, le=8)
    steps: int = Field(default=160, ge=1)
    #: Default schedule of the demo: one fault per layer (exception/comm/hang -> in-process, sigkill -> ft_launcher).
    faults: str = "exception@40:1,hang@70:0,sigkill@110:1"
    rendezvous_port: int = Field(default=29700, ge=1024, le=65535)
    #: In-process store port of local runs (must differ from rendezvous_port).
    inprocess_store_port: int = Field(default=29750, ge=1024, le=65535)
    #: Local CPU runs replace ``inprocess`` with these short timeouts (a hang is detected in seconds, not minutes).
    inprocess: InprocessConfig = Field(
        default_factory=lambda: InprocessConfig(
            soft_timeout_s=4.0,
            hard_timeout_s=8.0,
            heartbeat_interval_s=1.0,
            heartbeat_timeout_s=6.0,
            barrier_timeout_s=20.0,
            completion_timeout_s=20.0,
            gloo_timeout_s=3.0,
            monitor_thread_interval_s=0.5,
            monitor_process_interval_s=0.05,
            progress_watchdog_interval_s=0.5,
            step_timeout_floor_s=2.0,
            last_call_wait_s=0.1,
            termination_grace_s=2.0,
        )
    )
    #: Local CPU runs replace ``ft`` with these (short heartbeat timeouts, fast liveness checks).
    ft: FtLauncherConfig = Field(
        default_factory=lambda: FtLauncherConfig(
            initial_rank_heartbeat_timeout_s=60.0,
            rank_heartbeat_timeout_s=15.0,
            section_timeouts_s={"setup": 60.0, "step": 15.0, "checkpoint": 30.0},
            rank_out_of_section_timeout_s=30.0,
            max_restarts=3,
            monitor_interval_s=0.2,
        )
    )

    #: Local multi-node runs (``--nodes``) replace ``job.rendezvous`` with these: a lost rendezvous host is noticed
    #: within seconds, and a run whose replacement never comes ends within two minutes.
    rendezvous: RendezvousConfig = Field(
        default_factory=lambda: RendezvousConfig(join_timeout_s=120.0, read_timeout_s=10.0, close_timeout_s=10.0)
    )

    #: On CUDA every local timeout is multiplied by this: CUDA/NCCL setup and the NVRx async-checkpoint worker's
    #: first save (a spawned process) block the main thread for seconds (measured 4-6 s on an H200), which the
    #: CPU timeouts would misread as a hang. Scaling keeps the soft < hard < barrier ordering, and the checkpoint
    #: group's gloo deadline below the hard timeout: the ranks' first saves end seconds apart (their writers opened
    #: the CUDA IPC handles after 4.35 and 6.69 s on 2 x H200), which the unscaled 3 s turned into a spurious restart.
    cuda_timeout_scale: float = Field(default=2.5, ge=1.0)

    @model_validator(mode="after")
    def _ports(self) -> LocalConfig:
        if self.inprocess_store_port == self.rendezvous_port:
            raise ValueError("local.inprocess_store_port must differ from local.rendezvous_port")
        return self

    def timeouts(self, cuda: bool) -> tuple[InprocessConfig, FtLauncherConfig]:
        """The local in-process and ft_launcher settings, scaled by ``cuda_timeout_scale`` on CUDA."""
        if not cuda:
            return self.inprocess, self.ft
        k = self.cuda_timeout_scale
        ip = self.inprocess.model_copy(
            update={
                f: getattr(self.inprocess, f) * k
                for f in (
                    "soft_timeout_s",
                    "hard_timeout_s",
                    "heartbeat_timeout_s",
                    "barrier_timeout_s",
                    "completion_timeout_s",
                    "gloo_timeout_s",
                )
            }
        )
        ft = self.ft.model_copy(
            update={
                "initial_rank_heartbeat_timeout_s": self.ft.initial_rank_heartbeat_timeout_s * k,
                "rank_heartbeat_timeout_s": self.ft.rank_heartbeat_timeout_s * k,
                "rank_out_of_section_timeout_s": self.ft.rank_out_of_section_timeout_s * k,
                "section_timeouts_s": {n: t * k for n, t in self.ft.section_timeouts_s.items()},
            }
        )
        return ip, ft


class ProjectConfig(_Strict):
    """Root of ``project.yaml``."""

    #: ``demo``: synthesizes and validates offline with placeholder access settings (the committed top level, used
    #: by ``make demo`` and the tests); every stack carries a CloudFormation rule that refuses to deploy it.
    #: ``deploy``: a real environment; ``cluster.admin_principal_arn`` is required and documentation CIDRs are refused.
    environment_kind: Literal["demo", "deploy"] = "demo"
    aws: AwsConfig = Field(default_factory=AwsConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    gpu_nodes: GpuNodesConfig = Field(default_factory=GpuNodesConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    image: ImageConfig = Field(default_factory=ImageConfig)
    helm: HelmConfig = Field(default_factory=HelmConfig)
    dataset_prep: DatasetPrepConfig = Field(default_factory=DatasetPrepConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    job: KubernetesJobConfig = Field(default_factory=KubernetesJobConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    inprocess: InprocessConfig = Field(default_factory=InprocessConfig)
    ft: FtLauncherConfig = Field(default_factory=FtLauncherConfig)
    faults: FaultConfig = Field(default_factory=FaultConfig)
    local: LocalConfig = Field(default_factory=LocalConfig)

    @model_validator(mode="after")
    def _cross(self) -> ProjectConfig:
        net = self.network
        if ipaddress.IPv4Network(self.cluster.service_ipv4_cidr).overlaps(ipaddress.IPv4Network(net.vpc_cidr)):
            raise ValueError(
                f"cluster.service_ipv4_cidr {self.cluster.service_ipv4_cidr} overlaps network.vpc_cidr {net.vpc_cidr}"
            )
        if net.vpc_id is not None and net.private_subnets.get(net.gpu_subnet_id or "") != self.aws.availability_zone:
            raise ValueError(
                f"network.gpu_subnet_id {net.gpu_subnet_id!r} is in AZ "
                f"{net.private_subnets.get(net.gpu_subnet_id or '')!r}, not aws.availability_zone "
                f"{self.aws.availability_zone!r}"
            )
        if (self.inprocess.min_world_size or 0) > self.gpu_nodes.node_count * self.instance.gpus:
            raise ValueError("inprocess.min_world_size exceeds the world size (node_count x GPUs per node)")
        self._check_access()
        self._check_dataset_prep()
        return self

    def _check_access(self) -> None:
        """Outside ``demo``: someone must be able to use kubectl after deploy."""
        if self.environment_kind == "demo":
            return
        c = self.cluster
        if not c.admin_principal_arn:
            raise ValueError(
                "cluster.admin_principal_arn is required with environment_kind 'deploy' (got null): set the IAM role "
                "or user ARN you run kubectl with, e.g. arn:aws:iam::111122223333:role/Admin; without it no one "
                "can use kubectl after deploy"
            )
        if c.endpoint_access == "public":
            docs = [ipaddress.IPv4Network(d) for d in DOCUMENTATION_CIDRS]
            for cidr in c.public_access_cidrs:
                if any(ipaddress.IPv4Network(cidr).subnet_of(d) for d in docs):
                    raise ValueError(
                        f"cluster.public_access_cidrs entry {cidr!r} is a documentation range (RFC 5737: "
                        f"{', '.join(DOCUMENTATION_CIDRS)}) and admits nobody; with environment_kind 'deploy' set "
                        "your office/VPN CIDR, or cluster.endpoint_access: private"
                    )

    def _check_dataset_prep(self) -> None:
        """The dataset Job must fit on a system node next to its DaemonSets and controllers (half a node)."""
        node = system_instance_type(self.cluster.system_node_instance_type)
        prep = self.dataset_prep
        if prep.cpu > node.vcpus / 2 or prep.memory_gib > node.memory_gib / 2:
            raise ValueError(
                f"dataset_prep requests {prep.cpu:g} CPU / {prep.memory_gib} GiB, more than half of a "
                f"{node.name} system node ({node.vcpus} vCPUs, {node.memory_gib} GiB): allowed up to "
                f"{node.vcpus / 2:g} CPU / {node.memory_gib // 2} GiB; lower dataset_prep or use a larger "
                "cluster.system_node_instance_type"
            )

    @property
    def instance(self):  # -> InstanceType
        """The instance-type table row of ``gpu_nodes.instance_type``."""
        return INSTANCE_TYPES[self.gpu_nodes.instance_type]

    @property
    def layers(self) -> ModeLayers:
        """Which recovery layers ``job.mode`` turns on."""
        return MODE_LAYERS[self.job.mode]


def _semver(v: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+\.\d+\.\d+", v):
        raise ValueError(f"{v!r} is not a MAJOR.MINOR.PATCH version")
    return tuple(int(p) for p in v.split("."))
