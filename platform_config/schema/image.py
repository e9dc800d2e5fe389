"""The training container image (``image``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from platform_config.schema.base import _Strict

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
