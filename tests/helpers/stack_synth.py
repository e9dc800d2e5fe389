"""Each environment's whole platform, synthesized in-process once per session (a pytest plugin of the root
conftest): the unit tests of ``stacks/`` read it, and the real ``cdk`` CLI's output is compared with it
(``tests/integration/stacks/test_cdk_cli.py``). Both folders run in one xdist worker
(:data:`tests.helpers.xdist_scopes.SHARED_SESSION_FIXTURES`), so the session pays each synthesis once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # aws-cdk-lib starts a jsii kernel when imported: only where a synthesis is asked for
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from platform_config import ProjectConfig
    from stacks.platform_app import Platform

#: The planning time of the test syntheses (before prod's Capacity Block starts), so templates do not follow the clock.
NOW = "2026-12-01T00:00:00Z"


@dataclass
class Synthesized:
    """One synthesized environment."""

    cfg: ProjectConfig
    platform: Platform
    assembly: object
    outdir: Path

    def template(self, stack: cdk.Stack) -> Template:
        from aws_cdk.assertions import Template

        return Template.from_json(self.assembly.get_stack_by_name(stack.stack_name).template)  # type: ignore[attr-defined]

    def template_json(self, stack: cdk.Stack) -> dict:
        return self.assembly.get_stack_by_name(stack.stack_name).template  # type: ignore[attr-defined]


def new_app(outdir: Path, **context: object) -> cdk.App:
    """An App as the CLI builds it (cdk.json's context, the feature flags; the project's own,
    :data:`~stacks.platform_app.APP_CONTEXT`) with a fixed ``now``, plus ``context``."""
    from stacks.platform_app import NOW_CONTEXT_KEY, cdk_json_context
    from stacks.platform_app import new_app as project_app

    return project_app(context={**cdk_json_context(), NOW_CONTEXT_KEY: NOW, **context}, outdir=str(outdir))


def synthesize(env: str, outdir: Path) -> Synthesized:
    from platform_config import load_config
    from stacks.platform_app import build_platform

    cfg = load_config(env=env)
    app = new_app(outdir, env=env)
    platform = build_platform(app, cfg)
    return Synthesized(cfg=cfg, platform=platform, assembly=app.synth(), outdir=outdir)


@pytest.fixture(scope="session")
def default_env(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize("default", tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def prod_env(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize("prod", tmp_path_factory.mktemp("cdk-prod"))


@pytest.fixture(params=["default", "prod"], scope="session")
def any_env(request: pytest.FixtureRequest) -> Synthesized:
    return request.getfixturevalue(f"{request.param}_env")
