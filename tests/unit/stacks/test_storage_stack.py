"""The storage stack: output and a normalised snapshot."""

from __future__ import annotations

from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import check_golden, normalise
from tests.unit.stacks.test_cluster_stack import env_name


def test_output(any_env: Synthesized) -> None:
    out = any_env.template_json(any_env.platform.storage)["Outputs"]["FsxFileSystemId"]
    assert out["Value"]["Ref"].startswith("FsxFileSystem")


def test_depends_on_cluster_stack(any_env: Synthesized) -> None:
    assert any_env.platform.cluster in any_env.platform.storage.dependencies


def test_snapshot(any_env: Synthesized) -> None:
    check_golden(
        f"stacks/{env_name(any_env)}/storage.template.json",
        normalise(any_env.template_json(any_env.platform.storage)),
    )
