"""The root of ``project.yaml`` (:class:`ProjectConfig`) and the checks across its sections."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, model_validator

from platform_config.instance_types import INSTANCE_TYPES, system_instance_type
from platform_config.schema.aws import AwsConfig
from platform_config.schema.base import _Strict
from platform_config.schema.cluster import ClusterConfig, HelmConfig
from platform_config.schema.image import ImageConfig
from platform_config.schema.job import DatasetPrepConfig, KubernetesJobConfig
from platform_config.schema.local import LocalConfig
from platform_config.schema.modes import MODE_LAYERS, ModeLayers
from platform_config.schema.network import NetworkConfig
from platform_config.schema.nodes import GpuNodesConfig
from platform_config.schema.observability import ObservabilityConfig
from platform_config.schema.resilience import FaultConfig, FtLauncherConfig, InprocessConfig
from platform_config.schema.storage import StorageConfig
from platform_config.schema.training import CheckpointConfig, ModelConfig, TrainConfig

#: Documentation address blocks (RFC 5737): a public endpoint restricted to them admits nobody.
DOCUMENTATION_CIDRS = ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
#: ``environment_kind`` values: ``demo`` synthesizes offline with placeholders and is refused by CloudFormation at
#: deploy; ``deploy`` requires real access settings (``cluster.admin_principal_arn``, no documentation CIDRs).
ENVIRONMENT_KINDS = ("demo", "deploy")


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
        self._check_operations()
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

    def _check_operations(self) -> None:
        """Outside ``demo``: a pinned GPU AMI and alarms that reach someone (docs/deploy.md)."""
        if self.environment_kind == "demo":
            return
        c = self.cluster
        if not self.gpu_nodes.ami_release:
            raise ValueError(
                "gpu_nodes.ami_release is required with environment_kind 'deploy' (got null): pin the EKS AL2023 "
                "NVIDIA AMI release, e.g. v20261115 (aws ssm get-parameter --name /aws/service/eks/optimized-ami/"
                f"{c.kubernetes_version}/amazon-linux-2023/x86_64/nvidia/recommended/release_version), so that a new "
                "AMI never rolls the GPU nodes on a routine deploy"
            )
        obs = self.observability
        if not obs.emf_metrics:
            raise ValueError(
                "observability.emf_metrics must be true with environment_kind 'deploy' (got false): the alarms "
                "read the training's metrics"
            )
        if not (obs.alarm_email or obs.alarm_topic_arn):
            raise ValueError(
                "observability.alarm_email or observability.alarm_topic_arn is required with environment_kind "
                "'deploy': the alarms must reach someone"
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
