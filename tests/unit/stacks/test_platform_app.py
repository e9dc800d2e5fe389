"""App composition: environment selection, cdk.json context, and bad configuration through the app path."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml

from platform_config import ConfigError, config_from_dict
from platform_config.loader import DEFAULT_CONFIG_PATH
from platform_config.versions import DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_MINORS
from scripts.validate_cfn import validate_cdk_out
from stacks.platform_app import build_platform, cdk_json_context, config_for, environment_name, planning_time
from stacks.platform_app import new_app as project_app
from tests.helpers.stack_synth import Synthesized, new_app
from tests.unit.stacks.conftest import only


def test_four_stacks_named_after_the_cluster(any_env: Synthesized) -> None:
    name = any_env.cfg.cluster.name
    p = any_env.platform
    assert [s.stack_name for s in p.stacks] == [f"{name}-cluster", f"{name}-gpu", f"{name}-storage", f"{name}-image"]
    for stack in p.stacks:
        assert stack.region == any_env.cfg.aws.region


def test_no_template_holds_both_the_cluster_and_gpu_capacity(any_env: Synthesized) -> None:
    for stack in any_env.platform.stacks:
        kinds = {r["Type"] for r in any_env.template_json(stack)["Resources"].values()}
        assert not {"AWS::EKS::Cluster", "AWS::AutoScaling::AutoScalingGroup"} <= kinds, stack.stack_name
    gpu = {r["Type"] for r in any_env.template_json(any_env.platform.gpu)["Resources"].values()}
    assert "AWS::AutoScaling::AutoScalingGroup" in gpu and "AWS::EKS::Cluster" not in gpu


def test_planning_time_comes_from_context_or_the_clock(tmp_path: Path) -> None:
    app = new_app(tmp_path, now="2027-01-05T00:00:00Z")
    assert planning_time(app) == datetime(2027, 1, 5, tzinfo=UTC)
    assert planning_time(cdk.App(outdir=str(tmp_path / "x"))).tzinfo is not None
    with pytest.raises(ValueError, match="needs a time zone"):
        planning_time(new_app(tmp_path / "y", now="2027-01-05T00:00:00"))


def test_prod_is_bound_to_its_account(prod_env: Synthesized) -> None:
    assert prod_env.platform.cluster.account == prod_env.cfg.aws.account


def test_cdk_json_context_carries_feature_flags_and_no_reserved_key() -> None:
    ctx = cdk_json_context()
    assert ctx["@aws-cdk/aws-eks:useNativeOidcProvider"] is True
    # the CLI warns on every command about an ``aws:`` key in cdk.json; the App is given them (APP_CONTEXT)
    assert not [key for key in ctx if key.startswith("aws:")]


def test_the_project_s_app_records_no_stack_trace_and_keeps_what_it_is_given(tmp_path: Path) -> None:
    """Stack traces in the assembly's metadata would make ``cdk.out`` differ between runs of the same code."""
    app = project_app(context={"env": "prod"}, outdir=str(tmp_path))
    assert app.node.try_get_context("aws:cdk:disable-stack-trace") is True
    assert app.node.try_get_context("aws:cdk:disable-creation-stack-traces") is True
    assert app.node.try_get_context("env") == "prod"


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
        ("prod", {"cluster.admin_principal_arn": None}, "cluster.admin_principal_arn"),
        ("prod", {"gpu_nodes.capacity.end": None}, "gpu_nodes.capacity"),
        (
            "default",
            {"environment_kind": "deploy", "cluster.admin_principal_arn": "arn:aws:iam::111122223333:role/A"},
            "cluster.public_access_cidrs",
        ),
    ],
)
def test_bad_config_is_a_clear_error_naming_the_field(tmp_path: Path, env: str, patch: dict, field: str) -> None:
    message = bad_config(tmp_path, env, patch)
    assert field in message, message


def test_every_addon_and_chart_in_every_template_is_pinned(any_env: Synthesized) -> None:
    """No add-on or Helm release anywhere falls back to 'latest' or the EKS default."""
    helm = any_env.cfg.helm
    pinned_charts = {helm.nvidia_device_plugin, helm.efa_device_plugin, helm.node_termination_handler}
    addons, charts = {}, {}
    for stack in any_env.platform.stacks:
        for resource in any_env.template_json(stack)["Resources"].values():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::EKS::Addon":
                addons[props["AddonName"]] = props.get("AddonVersion")
            elif resource["Type"] == "Custom::AWSCDK-EKS-HelmChart":
                charts[props["Chart"]] = props.get("Version")
    assert addons == any_env.cfg.cluster.addon_versions
    assert set(charts) == {"nvidia-device-plugin", "aws-efa-k8s-device-plugin", "aws-node-termination-handler"}
    assert set(charts.values()) == pinned_charts


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_MINORS)
def test_every_accepted_kubernetes_version_synthesizes_the_whole_platform(
    tmp_path: Path, minor: int, request: pytest.FixtureRequest
) -> None:
    """All four stacks of every minor the configuration accepts synthesize (cdk-nag runs inside synth and fails it
    on a finding): the control plane, kube-proxy, the GPU AMI and the namespace's Pod Security
    labels all follow the minor. cfn-lint runs on the newest and the oldest minor only: between minors the templates
    differ in version strings, which it does not check (2-3 s a minor, 7-16 s on the loaded test machine). The
    default minor is the session's synthesis of the default environment (test_validate_cfn lints it), not another
    one (6-8 CPU-s)."""
    synthesized: Synthesized | None = None
    if f"1.{minor}" == DEFAULT_KUBERNETES_VERSION:
        synthesized = request.getfixturevalue("default_env")
        assert synthesized.cfg.cluster.kubernetes_version == DEFAULT_KUBERNETES_VERSION
        platform, assembly = synthesized.platform, synthesized.assembly
    else:
        cfg = config_from_dict({"cluster": {"kubernetes_version": f"1.{minor}"}})
        app = new_app(tmp_path)
        platform = build_platform(app, cfg)
        assembly = app.synth()
    cluster = assembly.get_stack_by_name(platform.cluster.stack_name).template
    assert only(cluster, "AWS::EKS::Cluster")["Properties"]["Version"] == f"1.{minor}"
    addons = {r["Properties"]["AddonName"]: r["Properties"]["AddonVersion"]
              for r in cluster["Resources"].values() if r["Type"] == "AWS::EKS::Addon"}  # fmt: skip
    assert addons["kube-proxy"].startswith(f"v1.{minor}.")
    gpu = assembly.get_stack_by_name(platform.gpu.stack_name).template
    ami = [
        p["Default"]
        for p in gpu["Parameters"].values()
        if p["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    ]
    assert ami == [f"/aws/service/eks/optimized-ami/1.{minor}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"]
    storage = json.dumps(assembly.get_stack_by_name(platform.storage.stack_name).template)
    assert f'\\"pod-security.kubernetes.io/enforce-version\\":\\"v1.{minor}\\"' in storage
    if minor in (min(SUPPORTED_KUBERNETES_MINORS), max(SUPPORTED_KUBERNETES_MINORS)) and synthesized is None:
        assert validate_cdk_out(tmp_path) == []
