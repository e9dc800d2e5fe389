"""FSx for Lustre SCRATCH_2 in the GPU subnet, its client rules, the checkpoint export, the static PV/PVC, namespace
and service account."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_fsx as fsx
from constructs import Construct

from platform_config import ProjectConfig
from stacks.checkpoint_export import CheckpointExport, CheckpointExportProps

FSX_CSI_DRIVER = "fsx.csi.aws.com"
#: Lustre's TCP ports (FSx for Lustre user guide, "File system access control with Amazon VPC"): 988 and 1018-1023.
LUSTRE_PORTS: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))
#: Pod Security admission of the training namespace: ``baseline`` in every mode. The training pods add no
#: capability (EFA memory registration relies on the GPU nodes' unlimited memlock, charts/pod_security.py), so the
#: namespace refuses any pod that asks for more than baseline allows (privileged, host namespaces, hostPath, added
#: capabilities beyond baseline's list such as IPC_LOCK or SYS_ADMIN).
POD_SECURITY_LEVELS = {"enforce": "baseline", "warn": "baseline", "audit": "baseline"}


def pod_security_labels(cfg: ProjectConfig) -> dict[str, str]:
    """``pod-security.kubernetes.io/<mode>`` and ``<mode>-version`` (pinned to the cluster minor) labels."""
    labels = {}
    for mode, level in POD_SECURITY_LEVELS.items():
        labels[f"pod-security.kubernetes.io/{mode}"] = level
        labels[f"pod-security.kubernetes.io/{mode}-version"] = f"v{cfg.cluster.kubernetes_version}"
    return labels


def training_namespace(cfg: ProjectConfig) -> dict:
    """The training namespace with its Pod Security admission labels."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": cfg.job.namespace, "labels": pod_security_labels(cfg)},
    }


def training_service_account(cfg: ProjectConfig) -> dict:
    """The training pods' service account; it mounts no token (the pods call no Kubernetes API)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": cfg.job.service_account, "namespace": cfg.job.namespace},
        "automountServiceAccountToken": False,
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
        client_security_groups: security groups of every node group that mounts the file system (the cluster
            security group is on both the system and the GPU nodes); each gets the Lustre rules in both directions.
        cluster: the EKS cluster receiving the Kubernetes objects.
    """

    cfg: ProjectConfig
    vpc: ec2.IVpc
    subnet: ec2.ISubnet
    client_security_groups: list[ec2.ISecurityGroup]
    cluster: eks.ICluster


class FsxStorage(Construct):
    """SCRATCH_2 Lustre 2.15 file system of ``storage.fsx_capacity_gib`` and its Kubernetes objects.

    Lustre rules (TCP 988 and 1018-1023) in both directions between the file system's security group and each
    client security group: clients reach the servers, and the servers can open connections back to the clients,
    as the FSx guide asks (without the latter, server-initiated callbacks are dropped under load). The file system's
    group also admits itself (the aws_fsx default). The PV is built from the file system's id, DNS name and mount
    name: CDK tokens that CloudFormation resolves at deploy time (no synth-time lookups, no values copied by hand).

    Checkpoints outlive the file system: ``storage.export_path`` is exported to a retained S3 bucket
    (:class:`~stacks.checkpoint_export.CheckpointExport`), and the file system itself is retained on stack deletion
    and on replacement (``DeletionPolicy``/``UpdateReplacePolicy: Retain``), so neither ``cdk destroy`` nor a
    capacity change deletes the last checkpoints before their export finished; the old file system is deleted by
    hand once its export is checked (docs/deploy.md).

    Attributes:
        file_system: the FSx for Lustre file system.
        export: the checkpoint bucket and its data repository association.
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
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.export = CheckpointExport(self, "Export", CheckpointExportProps(cfg=cfg, file_system=self.file_system))
        fsx_sg = self.file_system.connections.security_groups[0]
        for index, client in enumerate(props.client_security_groups):
            for low, high in LUSTRE_PORTS:
                self._lustre_rule(f"LustreToServers{index}Port{low}", fsx_sg, client, low, high, "FSx clients")
                self._lustre_rule(f"LustreToClients{index}Port{low}", client, fsx_sg, low, high, "the FSx file system")
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

    def _lustre_rule(
        self, rule_id: str, group: ec2.ISecurityGroup, source: ec2.ISecurityGroup, low: int, high: int, what: str
    ) -> ec2.CfnSecurityGroupIngress:
        """TCP ``low``-``high`` into ``group`` from ``source``, as its own resource (either group may be imported)."""
        ports = f"{low}" if low == high else f"{low}-{high}"
        return ec2.CfnSecurityGroupIngress(
            self,
            rule_id,
            group_id=group.security_group_id,
            source_security_group_id=source.security_group_id,
            ip_protocol="tcp",
            from_port=low,
            to_port=high,
            description=f"Lustre {ports} from {what}",
        )
