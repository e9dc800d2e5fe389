"""The shared file system (``storage``): FSx for Lustre."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from platform_config.schema.base import _Strict


class StorageConfig(_Strict):
    """FSx for Lustre SCRATCH_2 for checkpoints and data."""

    fsx_capacity_gib: int = 1200
    lustre_version: Literal["2.15"] = "2.15"
    mount_path: str = "/checkpoints"
    #: Static PersistentVolume / PersistentVolumeClaim names (PV made by the CDK app, claim used by the charts).
    pv_name: str = "fsx-lustre-pv"
    pvc_name: str = "fsx-lustre"
    #: Directory under the FSx root that is linked to the checkpoint bucket (a data repository association with
    #: automatic export): every file written or changed there is copied to S3, and the bucket outlives the stack.
    #: ``runs`` holds every training run's checkpoints (charts/names.py: ``<mount_path>/runs/<job>-<mode>``).
    export_path: str = Field(default="/runs", pattern=r"^/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$")

    @field_validator("fsx_capacity_gib")
    @classmethod
    def _capacity(cls, v: int) -> int:
        if v != 1200 and (v < 2400 or v % 2400):
            raise ValueError("SCRATCH_2 allows 1200, 2400, then multiples of 2400 GiB")
        return v
