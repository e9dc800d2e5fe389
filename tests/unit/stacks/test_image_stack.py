"""The image stack: ``TrainingImageUri`` output, SSM copy, snapshot; independent of the cluster."""

from __future__ import annotations

from stacks.image_stack import image_uri_parameter_name
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import check_golden, normalise, only
from tests.unit.stacks.test_cluster_stack import env_name


def test_image_uri_output_and_parameter(any_env: Synthesized) -> None:
    tpl = any_env.template_json(any_env.platform.image)
    uri = tpl["Outputs"]["TrainingImageUri"]["Value"]
    assert "container-assets" in str(uri)
    param = only(tpl, "AWS::SSM::Parameter")["Properties"]
    assert param["Name"] == image_uri_parameter_name(any_env.cfg)
    assert param["Value"] == uri


def test_independent_of_the_cluster(any_env: Synthesized) -> None:
    assert any_env.platform.image.dependencies == []


def test_snapshot(any_env: Synthesized) -> None:
    check_golden(
        f"stacks/{env_name(any_env)}/image.template.json", normalise(any_env.template_json(any_env.platform.image))
    )
