"""App composition: environment selection, cdk.json context, and bad configuration through the app path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from platform_config import ConfigError
from platform_config.loader import DEFAULT_CONFIG_PATH
from stacks.platform_app import build_platform, cdk_json_context, config_for, environment_name
from tests.unit.stacks.conftest import Synthesized, new_app


def test_three_stacks_named_after_the_cluster(any_env: Synthesized) -> None:
    name = any_env.cfg.cluster.name
    p = any_env.platform
    assert [p.cluster.stack_name, p.storage.stack_name, p.image.stack_name] == [
        f"{name}-cluster",
        f"{name}-storage",
        f"{name}-image",
    ]
    for stack in (p.cluster, p.storage, p.image):
        assert stack.region == any_env.cfg.aws.region


def test_prod_is_bound_to_its_account(prod_env: Synthesized) -> None:
    assert prod_env.platform.cluster.account == prod_env.cfg.aws.account


def test_cdk_json_context_carries_feature_flags() -> None:
    ctx = cdk_json_context()
    assert ctx["@aws-cdk/aws-eks:useNativeOidcProvider"] is True
    assert ctx["aws:cdk:disable-creation-stack-traces"] is True  # keeps cdk.out byte-identical across runs


def test_environment_selection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROJECT_ENV", raising=False)
    assert environment_name(new_app(tmp_path)) == "default"
    monkeypatch.setenv("PROJECT_ENV", "prod")
    assert environment_name(new_app(tmp_path)) == "prod"
    assert environment_name(new_app(tmp_path, env="default")) == "default"  # -c env=... wins


def bad_config(tmp_path: Path, env: str, patch: dict) -> str:
    data = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    target = data if env == "default" else data["environments"][env]
    for dotted, value in patch.items():
        *parents, leaf = dotted.split(".")
        node = target
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    path = tmp_path / "project.yaml"
    path.write_text(yaml.safe_dump(data))
    app = new_app(tmp_path / "out", env=env, config=str(path))
    with pytest.raises(ConfigError) as err:
        build_platform(app, config_for(app))
    return str(err.value)


@pytest.mark.parametrize(
    ("env", "patch", "field"),
    [
        ("default", {"cluster.kubernetes_version": "1.27"}, "cluster.kubernetes_version"),
        ("default", {"gpu_nodes.instance_type": "p3.16xlarge"}, "gpu_nodes.instance_type"),
        ("default", {"storage.fsx_capacity_gib": 2000}, "storage.fsx_capacity_gib"),
        ("default", {"gpu_nodes.node_count": 0}, "gpu_nodes.node_count"),
        ("prod", {"network.gpu_subnet_id": "subnet-0aaaaaaaaaaaaaaa1"}, "network.gpu_subnet_id"),
        ("prod", {"gpu_nodes.capacity.reservation_id": None}, "gpu_nodes.capacity"),
        ("default", {"cluster.addon_versions": {"vpc-cni": "v1.18.0-eksbuild.1"}}, "cluster.addon_versions"),
        ("default", {"cluster.service_ipv4_cidr": "10.0.0.0/16"}, "cluster.service_ipv4_cidr"),
    ],
)
def test_bad_config_is_a_clear_error_naming_the_field(tmp_path: Path, env: str, patch: dict, field: str) -> None:
    message = bad_config(tmp_path, env, patch)
    assert field in message, message
