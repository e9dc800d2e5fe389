"""The training image asset: Dockerfile, build arguments from config, the staged build context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from platform_config import config_from_dict, load_config
from stacks.training_image import DOCKERFILE, REPO_ROOT, build_args, runtime_pins
from tests.unit.stacks.conftest import Synthesized


def test_build_args_from_config() -> None:
    cfg = load_config()
    args = build_args(cfg)
    assert args["BASE_IMAGE"] == cfg.image.base_image
    assert args["NVRX_VERSION"] == cfg.image.nvrx_version == "0.7.0"
    assert "pydantic==" in args["RUNTIME_PACKAGES"] and "PyYAML==" in args["RUNTIME_PACKAGES"]


def test_runtime_pins_follow_requirements(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text(
        "pydantic==9.9.9\nPyYAML==1.2.3  # comment\nother==1\nsafetensors==0.1\ntokenizers==0.2\nhuggingface_hub==0.3\n"
    )
    assert runtime_pins(req) == "pydantic==9.9.9 PyYAML==1.2.3 safetensors==0.1 tokenizers==0.2 huggingface_hub==0.3"
    req.write_text("pydantic==9.9.9\nPyYAML==1.2.3\n")
    with pytest.raises(ValueError, match="no '==' pin for"):
        runtime_pins(req)


def test_dockerfile_uses_the_args_and_copies_the_packages() -> None:
    text = (REPO_ROOT / DOCKERFILE).read_text()
    assert "FROM ${BASE_IMAGE}" in text
    assert '"nvidia-resiliency-ext==${NVRX_VERSION}"' in text
    for copied in ("project.yaml", "platform_config/", "training/"):
        assert f"COPY {copied}" in text


def test_asset_stages_only_the_image_inputs(default_env: Synthesized) -> None:
    manifest = json.loads((default_env.outdir / "fsdp-resilience-image.assets.json").read_text())
    (image,) = manifest["dockerImages"].values()
    src = image["source"]
    assert src["dockerFile"] == DOCKERFILE
    assert src["platform"] == "linux/amd64"
    assert src["dockerBuildArgs"] == build_args(default_env.cfg)
    staged = default_env.outdir / src["directory"]
    top = sorted(p.name for p in staged.iterdir())
    assert top == ["platform_config", "project.yaml", "training"]
    assert not list(staged.rglob("__pycache__"))


def test_uri_override_skips_the_asset(tmp_path: Path) -> None:
    import aws_cdk as cdk

    from stacks.training_image import TrainingImage, TrainingImageProps

    cfg = config_from_dict({"image": {"uri_override": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1"}})
    image = TrainingImage(cdk.Stack(cdk.App(outdir=str(tmp_path))), "I", TrainingImageProps(cfg=cfg))
    assert image.asset is None and image.image_uri == cfg.image.uri_override
