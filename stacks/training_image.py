"""The training container image: ``training/Dockerfile`` built and pushed as a CDK ``DockerImageAsset``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import IgnoreMode
from aws_cdk import aws_ecr_assets as ecr_assets
from constructs import Construct

from platform_config import ProjectConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = "training/Dockerfile"
DOCKERIGNORE = REPO_ROOT / "training" / ".dockerignore"


def context_excludes() -> list[str]:
    """Docker-ignore patterns of the build context (``training/.dockerignore``)."""
    return [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]


def build_args(cfg: ProjectConfig) -> dict[str, str]:
    """Docker build arguments, all from ``image.*``. The Python packages come from the hashed lock
    ``image/requirements.txt`` in the build context; the version arguments are what the build checks against."""
    image = cfg.image
    return {
        "BASE_IMAGE": image.base_image,
        "BUILD_IMAGE": image.build_image,
        "NCCL_TESTS_COMMIT": image.nccl_tests_commit,
        "UBUNTU_SNAPSHOT": image.ubuntu_snapshot,
        "EFA_INSTALLER_VERSION": image.efa_installer_version,
        "AWS_OFI_NCCL_VERSION": image.aws_ofi_nccl_version,
        "PYTHON_VERSION": image.python_version,
        "TORCH_VERSION": image.torch_version,
        "TORCH_CUDA_VERSION": image.cuda_version,
        "NCCL_VERSION": image.nccl_version,
        "NVRX_VERSION": image.nvrx_version,
    }


@dataclass(frozen=True)
class TrainingImageProps:
    """Inputs of :class:`TrainingImage`.

    Attributes:
        cfg: the project configuration (``image.*``).
        context: build context (the repository root: the image copies ``image/``, ``training/``,
            ``platform_config/`` and ``project.yaml``).
    """

    cfg: ProjectConfig
    context: Path = REPO_ROOT


class TrainingImage(Construct):
    """The image asset (or ``image.uri_override`` when a prebuilt image is configured).

    ``cdk deploy`` builds the image for linux/amd64 and pushes it to the CDK bootstrap ECR repository
    (``cdk-<qualifier>-container-assets-<account>-<region>``); the tag is the content hash, so a
    rebuild only happens when the Dockerfile, the build arguments or the copied files change. Docker is
    needed at deploy time only: synth stages the context and computes the hash.

    Attributes:
        image_uri: the image URI (a token resolved at deploy time for the asset).
        asset: the asset, or None with ``image.uri_override``.
    """

    def __init__(self, scope: Construct, construct_id: str, props: TrainingImageProps) -> None:
        super().__init__(scope, construct_id)
        cfg = props.cfg
        self.asset: ecr_assets.DockerImageAsset | None = None
        if cfg.image.uri_override:
            self.image_uri = cfg.image.uri_override
            return
        self.asset = ecr_assets.DockerImageAsset(
            self,
            "Asset",
            directory=str(props.context),
            file=DOCKERFILE,
            build_args=build_args(cfg),
            platform=ecr_assets.Platform.LINUX_AMD64,
            exclude=context_excludes(),
            ignore_mode=IgnoreMode.DOCKER,
            display_name="training-image",
        )
        self.image_uri = self.asset.image_uri
