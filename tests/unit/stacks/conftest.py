"""Shared fixtures: the App is built with cdk.json's context, and each environment is synthesized once per session."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from platform_config import ProjectConfig, load_config
from stacks.platform_app import NOW_CONTEXT_KEY, Platform, build_platform, cdk_json_context

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
#: ``UPDATE_GOLDEN=1 pytest tests/unit/stacks`` rewrites the golden files instead of comparing.
UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN") == "1"
_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass
class Synthesized:
    """One synthesized environment."""

    cfg: ProjectConfig
    platform: Platform
    assembly: object
    outdir: Path

    def template(self, stack: cdk.Stack) -> Template:
        return Template.from_json(self.assembly.get_stack_by_name(stack.stack_name).template)  # type: ignore[attr-defined]

    def template_json(self, stack: cdk.Stack) -> dict:
        return self.assembly.get_stack_by_name(stack.stack_name).template  # type: ignore[attr-defined]


#: The planning time of the test syntheses (before prod's Capacity Block starts), so templates do not follow the clock.
NOW = "2026-12-01T00:00:00Z"


def new_app(outdir: Path, **context: object) -> cdk.App:
    """An App with cdk.json's context (feature flags) and a fixed ``now``, plus ``context``."""
    return cdk.App(context={**cdk_json_context(), NOW_CONTEXT_KEY: NOW, **context}, outdir=str(outdir))


def synthesize(env: str, outdir: Path) -> Synthesized:
    cfg = load_config(env=env)
    app = new_app(outdir, env=env)
    platform = build_platform(app, cfg)
    return Synthesized(cfg=cfg, platform=platform, assembly=app.synth(), outdir=outdir)


def normalise(template: dict) -> str:
    """Template JSON with asset hashes (which change with handler and image code) replaced."""
    return _HASH.sub("<ASSET_HASH>", json.dumps(template, indent=1, sort_keys=True)) + "\n"


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/<name>`` (rewrite it with ``UPDATE_GOLDEN=1``)."""
    path = GOLDEN_DIR / name
    if UPDATE_GOLDEN or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if not UPDATE_GOLDEN:
            pytest.fail(f"golden file {path} did not exist; written now, re-run the tests")
    assert text == path.read_text(), f"{name} differs from the golden file (UPDATE_GOLDEN=1 to accept)"


@pytest.fixture(scope="session")
def default_env(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize("default", tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def prod_env(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize("prod", tmp_path_factory.mktemp("cdk-prod"))


@pytest.fixture(params=["default", "prod"], scope="session")
def any_env(request: pytest.FixtureRequest) -> Synthesized:
    return request.getfixturevalue(f"{request.param}_env")


def resources(template: dict, kind: str) -> dict[str, dict]:
    """Resources of CloudFormation type ``kind``, by logical id."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def only(template: dict, kind: str) -> dict:
    """The single resource of type ``kind``."""
    found = list(resources(template, kind).values())
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]
