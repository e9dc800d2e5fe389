"""The S3 bucket that keeps every checkpoint the training writes to FSx, through a data repository association.

SCRATCH_2 file systems keep one copy of each file, on servers that are not replaced when they fail, and the file
system goes with its stack. FSx for Lustre links 2.12 and 2.15 file systems of every deployment type except
SCRATCH_1 to S3 with a data repository association (CloudFormation, ``AWS::FSx::DataRepositoryAssociation``), whose
automatic export copies each new or changed file to the bucket once it is closed. So:

* ``storage.export_path`` (``/runs``, where every run's checkpoints live) is linked to ``s3://<bucket>/runs/``,
  exporting ``NEW`` and ``CHANGED`` files (not ``DELETED``: pruning old checkpoints on FSx keeps them in S3);
* a new file system (a capacity change replaces it) lists what the bucket holds at creation
  (``BatchImportMetaDataOnCreate``) and loads a file's data on first read, so a Job resumes from the last exported
  checkpoint;
* the bucket is retained when the stack is deleted, versioned (an overwritten object stays recoverable; old
  versions expire after :data:`NONCURRENT_DAYS` days), encrypted, TLS-only and private.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3
from constructs import Construct

from platform_config import ProjectConfig
from stacks.compliance import acknowledge

#: Events the association exports (a file created or changed under the linked directory).
EXPORT_EVENTS = ("NEW", "CHANGED")
#: Days a replaced object version stays in the bucket.
NONCURRENT_DAYS = 30


@dataclass(frozen=True)
class CheckpointExportProps:
    """Inputs of :class:`CheckpointExport`.

    Attributes:
        cfg: the project configuration (``storage.export_path``).
        file_system: the FSx for Lustre file system (2.15, SCRATCH_2).
    """

    cfg: ProjectConfig
    file_system: fsx.LustreFileSystem


class CheckpointExport(Construct):
    """The checkpoint bucket and the data repository association (see the module docstring).

    Attributes:
        bucket: the retained, versioned bucket.
        association: the ``AWS::FSx::DataRepositoryAssociation``.
    """

    def __init__(self, scope: Construct, construct_id: str, props: CheckpointExportProps) -> None:
        super().__init__(scope, construct_id)
        path = props.cfg.storage.export_path
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=True,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=Duration.days(NONCURRENT_DAYS))],
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Only the FSx data repository association writes here, and FSx logs its export activity; server access "
            "logs would need a second bucket that outlives this one.",
        )
        self.association = fsx.CfnDataRepositoryAssociation(
            self,
            "Association",
            file_system_id=props.file_system.file_system_id,
            file_system_path=path,
            data_repository_path=f"s3://{self.bucket.bucket_name}{path}/",
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(events=list(EXPORT_EVENTS))
            ),
        )
