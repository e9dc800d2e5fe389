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

    #: Base image (public registry, pinned by ``@sha256:`` digest; a tag may stay in front for readers): CUDA 13.0
    #: user space on Ubuntu 24.04 (glibc 2.39). A tag alone can be re-pushed, so the same configuration could build
    #: a different image; the digest cannot (docs/image.md says where this one comes from).
    base_image: str = (
        "nvcr.io/nvidia/cuda:13.0.2-base-ubuntu24.04"
        "@sha256:2ab6381d970b211fb93853796dc6707eb8a72575a375c422b17cf4d8b2641701"
    )
    #: The CUDA devel image (same CUDA, same Ubuntu, digest-pinned) that compiles nccl-tests in a build stage.
    build_image: str = (
        "nvcr.io/nvidia/cuda:13.0.2-devel-ubuntu24.04"
        "@sha256:5dc1bca23d05bd37b011be68ec470c03b403a5da07ec3a86e41af9470e9d0cc6"
    )
    #: Commit of github.com/NVIDIA/nccl-tests whose all_reduce_perf the image carries (tag v2.19.6).
    nccl_tests_commit: str = Field(default="a0b82b2260cf5152b9f8c061bbf7eaf0ba096432", pattern=r"^[0-9a-f]{40}$")
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

    @field_validator("base_image", "build_image")
    @classmethod
    def _base(cls, v: str) -> str:
        if _PRIVATE_REGISTRY.match(v):
            raise ValueError(
                "is in a private ECR registry, whose pull needs a login that the CDK asset build does not perform "
                "(aws/aws-cdk#17268); use a public base (nvcr.io, public.ecr.aws, docker.io) or build elsewhere "
                "and set image.uri_override"
            )
        if not re.search(r"@sha256:[0-9a-f]{64}$", v):
            raise ValueError(
                "must be pinned by digest, <image>[:tag]@sha256:<64 hex digits> (docker buildx imagetools inspect "
                "<image:tag> prints it): a tag alone can be re-pushed"
            )
        return v
