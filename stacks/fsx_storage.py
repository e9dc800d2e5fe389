"""FSx for Lustre SCRATCH_2 in the GPU subnet, plus the static PV/PVC, namespace and service account."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_fsx as fsx
from constructs import Construct

from platform_config import ProjectConfig

FSX_CSI_DRIVER = "fsx.csi.aws.com"


def training_namespace(cfg: ProjectConfig) -> dict:
    """The training namespace."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cfg.job.namespace}}


def training_service_account(cfg: ProjectConfig) -> dict:
    """The training pods' service account."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": cfg.job.service_account, "namespace": cfg.job.namespace},
    }


def persistent_volume(cfg: ProjectConfig, file_system_id: str, dns_name: str, mount_name: str) -> dict:
    """Static PV of the file system (ReadWriteMany, Retain, no storage class)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": cfg.storage.pv_name},
        "spec": {
            "capacity": {"storage": f"{cfg.storage.fsx_capacity_gib}Gi"},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": ["flock"],
            "claimRef": {"namespace": cfg.job.namespace, "name": cfg.storage.pvc_name},
            "csi": {
                "driver": FSX_CSI_DRIVER,
                "volumeHandle": file_system_id,
                "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
            },
        },
    }


def persistent_volume_claim(cfg: ProjectConfig) -> dict:
    """The claim the training Job mounts (bound to the static PV by name)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": cfg.storage.pvc_name, "namespace": cfg.job.namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": cfg.storage.pv_name,
            "resources": {"requests": {"storage": f"{cfg.storage.fsx_capacity_gib}Gi"}},
        },
    }


@dataclass(frozen=True)
class FsxStorageProps:
    """Inputs of :class:`FsxStorage`.

    Attributes:
        cfg: the project configuration (``storage.*``, ``job.namespace`` / ``job.service_account``).
        vpc: the VPC.
        subnet: the GPU subnet (so file system and nodes share one AZ).
        node_security_group: the GPU nodes' security group, admitted on the Lustre ports.
        cluster: the EKS cluster receiving the Kubernetes objects.
    """

    cfg: ProjectConfig
    vpc: ec2.IVpc
    subnet: ec2.ISubnet
    node_security_group: ec2.ISecurityGroup
    cluster: eks.ICluster


class FsxStorage(Construct):
    """SCRATCH_2 Lustre 2.15 file system of ``storage.fsx_capacity_gib`` and its Kubernetes objects.

    The PV is built here from the file system's id, DNS name and mount name: CDK tokens that
    CloudFormation resolves at deploy time (no synth-time lookups, no values copied by hand).

    Attributes:
        file_system: the FSx for Lustre file system.
        namespace_manifest: namespace + service account.
        volume_manifest: PV + PVC.
    """

    def __init__(self, scope: Construct, construct_id: str, props: FsxStorageProps) -> None:
        super().__init__(scope, construct_id)
        cfg = props.cfg
        self.file_system = fsx.LustreFileSystem(
            self,
            "FileSystem",
            vpc=props.vpc,
            vpc_subnet=props.subnet,
            storage_capacity_gib=cfg.storage.fsx_capacity_gib,
            file_system_type_version=fsx.FileSystemTypeVersion.V_2_15,
            lustre_configuration=fsx.LustreConfiguration(deployment_type=fsx.LustreDeploymentType.SCRATCH_2),
            removal_policy=RemovalPolicy.DESTROY,
        )
        # aws_fsx's default port range is TCP 988-1023: Lustre (988) and LNet (1018-1023).
        self.file_system.connections.allow_default_port_from(props.node_security_group, "Lustre from GPU nodes")
        self.namespace_manifest = eks.KubernetesManifest(
            self,
            "Namespace",
            cluster=props.cluster,
            manifest=[training_namespace(cfg), training_service_account(cfg)],
        )
        self.volume_manifest = eks.KubernetesManifest(
            self,
            "Volume",
            cluster=props.cluster,
            manifest=[
                persistent_volume(
                    cfg,
                    self.file_system.file_system_id,
                    self.file_system.dns_name,
                    self.file_system.mount_name,
                ),
                persistent_volume_claim(cfg),
            ],
        )
        self.volume_manifest.node.add_dependency(self.namespace_manifest)
