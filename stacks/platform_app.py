"""Compose the three stacks from a :class:`ProjectConfig` and attach cdk-nag (shared by app.py and the tests)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from platform_config import ProjectConfig, load_config
from platform_config.loader import ENV_VAR
from stacks.cluster_stack import ClusterStack
from stacks.compliance import add_compliance_checks
from stacks.image_stack import TrainingImageStack
from stacks.storage_stack import StorageStack

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = REPO_ROOT / "cdk.json"
#: cdk context key naming the ``project.yaml`` environment (``cdk synth -c env=prod``).
ENV_CONTEXT_KEY = "env"
#: Optional cdk context key with another configuration file (``cdk synth -c config=other.yaml``).
CONFIG_CONTEXT_KEY = "config"


@dataclass
class Platform:
    """The stacks of one environment."""

    cluster: ClusterStack
    storage: StorageStack
    image: TrainingImageStack


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The ``context`` block of cdk.json (feature flags): what ``cdk synth`` gives the App."""
    return dict(json.loads(path.read_text()).get("context", {}))


def environment_name(app: cdk.App) -> str:
    """``-c env=<name>``, else ``$PROJECT_ENV``, else ``default``."""
    return app.node.try_get_context(ENV_CONTEXT_KEY) or os.environ.get(ENV_VAR) or "default"


def stack_environment(cfg: ProjectConfig) -> cdk.Environment:
    """Region (and account when configured) of every stack: no lookups need them at synth."""
    return cdk.Environment(account=cfg.aws.account, region=cfg.aws.region)


def build_platform(app: cdk.App, cfg: ProjectConfig) -> Platform:
    """Add the stacks of ``cfg`` to ``app`` and register the AwsSolutions checks (run at synth)."""
    env = stack_environment(cfg)
    name = cfg.cluster.name
    tags = {"project": name}
    cluster = ClusterStack(
        app, f"{name}-cluster", cfg=cfg, env=env, tags=tags, description=f"EKS + p5 GPU nodes for {name}"
    )
    storage = StorageStack(
        app,
        f"{name}-storage",
        cfg=cfg,
        platform=cluster,
        env=env,
        tags=tags,
        description=f"FSx for Lustre scratch storage for {name}",
    )
    image = TrainingImageStack(
        app, f"{name}-image", cfg=cfg, env=env, tags=tags, description=f"Training image of {name}"
    )
    add_compliance_checks(app)
    return Platform(cluster=cluster, storage=storage, image=image)


def config_for(app: cdk.App) -> ProjectConfig:
    """The configuration ``app`` asks for (``-c config=...``, ``-c env=...``); errors name the bad fields."""
    return load_config(app.node.try_get_context(CONFIG_CONTEXT_KEY), env=environment_name(app))


def main() -> None:
    """Entry point of ``cdk.json``'s ``app``: load the environment's config, build, synth."""
    app = cdk.App()
    build_platform(app, config_for(app))
    app.synth()
