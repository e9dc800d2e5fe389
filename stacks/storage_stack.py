"""``<name>-storage``: the FSx for Lustre scratch file system and its Kubernetes volume objects."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from platform_config import ProjectConfig
from stacks.cluster_stack import ClusterStack
from stacks.fsx_storage import FsxStorage, FsxStorageProps


class StorageStack(Stack):
    """Scratch storage with its own lifecycle (resize = replace). Outputs ``FsxFileSystemId`` and
    ``CheckpointBucket``."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cfg: ProjectConfig, platform: ClusterStack, **kwargs
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.storage = FsxStorage(
            self,
            "Fsx",
            FsxStorageProps(
                cfg=cfg,
                vpc=platform.network.vpc,
                subnet=platform.network.gpu_subnet,
                # EKS puts the cluster security group on the system nodes (managed node group without a launch
                # template) and the GPU launch template attaches it to every GPU interface: both mount FSx.
                client_security_groups=[platform.eks.cluster.cluster_security_group],
                cluster=platform.eks.cluster,
            ),
        )
        CfnOutput(
            self, "FsxFileSystemId", value=self.storage.file_system.file_system_id, description="FSx for Lustre id"
        )
        CfnOutput(
            self,
            "CheckpointBucket",
            value=self.storage.export.bucket.bucket_name,
            description="S3 bucket that keeps every exported checkpoint (retained on delete)",
        )
