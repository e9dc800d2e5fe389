"""The cluster stack: outputs and a normalised snapshot."""

from __future__ import annotations

from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import check_golden, normalise


def env_name(env: Synthesized) -> str:
    return "prod" if env.cfg.network.vpc_id else "default"


def test_outputs(any_env: Synthesized) -> None:
    outputs = any_env.template_json(any_env.platform.cluster)["Outputs"]
    assert outputs["ClusterName"]["Value"] == {"Ref": "EksClusterB2BDED5B"}
    cmd = outputs["UpdateKubeconfigCommand"]["Value"]["Fn::Join"][1]
    assert cmd[0] == f"aws eks update-kubeconfig --region {any_env.cfg.aws.region} --name "


def test_snapshot(any_env: Synthesized) -> None:
    check_golden(
        f"stacks/{env_name(any_env)}/cluster.template.json",
        normalise(any_env.template_json(any_env.platform.cluster)),
    )
