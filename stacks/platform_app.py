"""Compose the four stacks from a :class:`ProjectConfig` and attach cdk-nag (shared by app.py and the tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from platform_config import ProjectConfig, exits_on_config_error
from platform_config.cdk_context import config_from_context
from platform_config.cdk_context import environment_name as context_environment_name
from stacks.cluster_stack import ClusterStack
from stacks.compliance import add_compliance_checks
from stacks.deploy_guard import refuse_demo_deploy
from stacks.gpu_stack import GpuStack
from stacks.image_stack import TrainingImageStack
from stacks.storage_stack import StorageStack

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = REPO_ROOT / "cdk.json"
#: Optional cdk context key with the moment Capacity Block actions are planned from (``-c now=2027-01-01T00:00:00Z``;
#: default: the synthesis time). The tests fix it so that the templates do not depend on the clock.
NOW_CONTEXT_KEY = "now"
#: Context every App of this project is built with: no stack traces in the assembly's metadata, so that ``cdk.out`` is
#: byte-identical across runs. In the code, not in cdk.json: the CLI warns about any ``aws:`` key it finds there
#: ("A reserved context key ... should be removed"), on every command.
APP_CONTEXT: dict[str, Any] = {
    "aws:cdk:disable-stack-trace": True,
    "aws:cdk:disable-creation-stack-traces": True,
}


@dataclass
class Platform:
    """The stacks of one environment."""

    cluster: ClusterStack
    gpu: GpuStack
    storage: StorageStack
    image: TrainingImageStack

    @property
    def stacks(self) -> list[cdk.Stack]:
        return [self.cluster, self.gpu, self.storage, self.image]


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The ``context`` block of cdk.json (feature flags): what ``cdk synth`` gives the App."""
    return dict(json.loads(path.read_text()).get("context", {}))


def new_app(**props: Any) -> cdk.App:
    """An App with :data:`APP_CONTEXT` under the context it is given (``props["context"]``) and what the CLI passes."""
    return cdk.App(**{**props, "context": {**APP_CONTEXT, **props.get("context", {})}})


def environment_name(app: cdk.App) -> str:
    """``-c env=<name>``, else ``$PROJECT_ENV``, else ``default``."""
    return context_environment_name(app.node.try_get_context)


def planning_time(app: cdk.App) -> datetime:
    """``-c now=<ISO 8601 with time zone>``, else the current time (UTC)."""
    value = app.node.try_get_context(NOW_CONTEXT_KEY)
    if not value:
        return datetime.now(UTC)
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"context {NOW_CONTEXT_KEY}={value!r} needs a time zone, e.g. 2027-01-01T00:00:00Z")
    return moment


def stack_environment(cfg: ProjectConfig) -> cdk.Environment:
    """Region (and account when configured) of every stack: no lookups need them at synth."""
    return cdk.Environment(account=cfg.aws.account, region=cfg.aws.region)


def build_platform(app: cdk.App, cfg: ProjectConfig, now: datetime | None = None) -> Platform:
    """Add the stacks of ``cfg`` to ``app`` and register the AwsSolutions checks (run at synth).

    ``now`` plans the Capacity Block actions (default: :func:`planning_time`)."""
    env = stack_environment(cfg)
    name = cfg.cluster.name
    tags = {"project": name}
    cluster = ClusterStack(
        app, f"{name}-cluster", cfg=cfg, env=env, tags=tags, description=f"EKS control plane and system nodes of {name}"
    )
    gpu = GpuStack(
        app,
        f"{name}-gpu",
        cfg=cfg,
        platform=cluster,
        now=now or planning_time(app),
        env=env,
        tags=tags,
        description=f"{cfg.gpu_nodes.instance_type} GPU nodes of {name} ({cfg.gpu_nodes.capacity.type.value})",
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
    platform = Platform(cluster=cluster, gpu=gpu, storage=storage, image=image)
    for stack in platform.stacks:
        refuse_demo_deploy(stack, cfg)
    add_compliance_checks(app)
    return platform


def config_for(app: cdk.App) -> ProjectConfig:
    """The configuration ``app`` asks for (``-c config=...``, ``-c env=...``); errors name the bad fields."""
    return config_from_context(app.node.try_get_context)


@exits_on_config_error
def main() -> None:
    """Entry point of ``cdk.json``'s ``app``: load the environment's config, build, synth."""
    app = new_app()
    build_platform(app, config_for(app))
    app.synth()
