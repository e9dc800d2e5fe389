"""The training container image: ``training/Dockerfile`` built and pushed as a CDK ``DockerImageAsset``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import IgnoreMode
from aws_cdk import aws_ecr_assets as ecr_assets
from constructs import Construct

from platform_config import ProjectConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = "training/Dockerfile"
DOCKERIGNORE = REPO_ROOT / "training" / ".dockerignore"
#: Packages the image needs besides the DLC's own (torch, numpy): versions come from requirements.txt.
RUNTIME_PACKAGES = ("pydantic", "PyYAML", "safetensors", "tokenizers", "huggingface_hub")


def runtime_pins(requirements: Path = REPO_ROOT / "requirements.txt") -> str:
    """``name==version`` of each :data:`RUNTIME_PACKAGES` entry, as pinned in ``requirements.txt``."""
    pins = {}
    for line in requirements.read_text().splitlines():
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)==([^\s;#]+).*", line)
        if m:
            pins[m.group(1).lower()] = f"{m.group(1)}=={m.group(2)}"
    missing = [p for p in RUNTIME_PACKAGES if p.lower() not in pins]
    if missing:
        raise ValueError(f"{requirements} has no '==' pin for {missing}")
    return " ".join(pins[p.lower()] for p in RUNTIME_PACKAGES)


def context_excludes() -> list[str]:
    """Docker-ignore patterns of the build context (``training/.dockerignore``)."""
    return [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]


def build_args(cfg: ProjectConfig) -> dict[str, str]:
    """Docker build arguments, all from the configuration and requirements.txt."""
    return {
        "BASE_IMAGE": cfg.image.base_image,
        "NVRX_VERSION": cfg.image.nvrx_version,
        "RUNTIME_PACKAGES": runtime_pins(),
    }


@dataclass(frozen=True)
class TrainingImageProps:
    """Inputs of :class:`TrainingImage`.

    Attributes:
        cfg: the project configuration (``image.*``).
        context: build context (the repository root: the image copies ``training/``, ``platform_config/``
            and ``project.yaml``).
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
