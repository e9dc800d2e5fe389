"""The EKS control plane: version, auth mode, endpoint, logging, KMS secrets, kubectl layer, admin entry."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from platform_config import config_from_dict
from platform_config.versions import SUPPORTED_KUBERNETES_MINORS
from stacks.cluster import ClusterConfigError, EksCluster, EksClusterProps, kubectl_layer
from tests.helpers.stack_synth import Synthesized, new_app
from tests.unit.stacks.conftest import only, resources


def cluster_props(env: Synthesized) -> dict:
    return only(env.template_json(env.platform.cluster), "AWS::EKS::Cluster")["Properties"]


def test_version_logging_auth_and_secrets(any_env: Synthesized) -> None:
    p = cluster_props(any_env)
    assert p["Version"] == any_env.cfg.cluster.kubernetes_version == "1.36"
    assert p["Name"] == any_env.cfg.cluster.name
    assert p["AccessConfig"]["AuthenticationMode"] == "API"
    assert p["AccessConfig"]["BootstrapClusterCreatorAdminPermissions"] is False
    assert p["BootstrapSelfManagedAddons"] is False
    assert p["KubernetesNetworkConfig"]["ServiceIpv4Cidr"] == any_env.cfg.cluster.service_ipv4_cidr
    types = {t["Type"] for t in p["Logging"]["ClusterLogging"]["EnabledTypes"]}
    assert types == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    (enc,) = p["EncryptionConfig"]
    assert enc["Resources"] == ["secrets"]
    key_id = enc["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    key = any_env.template_json(any_env.platform.cluster)["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True


def test_auto_mode_off(any_env: Synthesized) -> None:
    p = cluster_props(any_env)
    assert "ComputeConfig" not in p or p["ComputeConfig"].get("Enabled") is not True


def test_public_endpoint_restricted_to_cidrs(default_env: Synthesized) -> None:
    vpc_cfg = cluster_props(default_env)["ResourcesVpcConfig"]
    assert vpc_cfg["EndpointPublicAccess"] is True and vpc_cfg["EndpointPrivateAccess"] is True
    assert vpc_cfg["PublicAccessCidrs"] == default_env.cfg.cluster.public_access_cidrs


def test_private_endpoint_in_prod(prod_env: Synthesized) -> None:
    vpc_cfg = cluster_props(prod_env)["ResourcesVpcConfig"]
    assert vpc_cfg["EndpointPublicAccess"] is False and vpc_cfg["EndpointPrivateAccess"] is True


def test_kubectl_layer_matches_version(default_env: Synthesized) -> None:
    template = default_env.template_json(default_env.platform.cluster)
    layers = resources(template, "AWS::Lambda::LayerVersion")
    kubectl = {k: v for k, v in layers.items() if "/opt/kubectl/kubectl" in v["Properties"].get("Description", "")}
    ((layer_id, layer),) = kubectl.items()
    # the layer's kubectl is of the cluster's minor (the description names its version: "/opt/kubectl/kubectl 1.36.3")
    version = layer["Properties"]["Description"].split("/opt/kubectl/kubectl ", 1)[1].split(";")[0]
    minor = default_env.cfg.cluster.kubernetes_version
    assert version.startswith(f"{minor}."), (version, minor)
    # and it is the layer the cluster's kubectl provider runs with
    users = [k for k, v in resources(template, "AWS::Lambda::Function").items()
             if {"Ref": layer_id} in v["Properties"].get("Layers", [])]  # fmt: skip
    assert users, f"no Lambda function runs with {layer_id}"


def test_missing_kubectl_layer_names_the_field() -> None:
    # The configuration accepts only minors whose layer is pinned; model_copy skips validation to reach this guard.
    base = config_from_dict({})
    cfg = base.model_copy(update={"cluster": base.cluster.model_copy(update={"kubernetes_version": "1.30"})})
    with pytest.raises(ClusterConfigError, match=r"cluster.kubernetes_version '1.30'.*lambda-layer-kubectl-v30"):
        kubectl_layer(cdk.Stack(cdk.App()), cfg)


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_MINORS)
def test_every_accepted_version_synthesizes(tmp_path, minor: int) -> None:
    """The control plane of every minor the configuration accepts synthesizes with its own kubectl layer."""
    cfg = config_from_dict({"cluster": {"kubernetes_version": f"1.{minor}"}})
    stack = cdk.Stack(new_app(tmp_path), "T", env=cdk.Environment(region="us-east-1"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-east-1a", "us-east-1b"])
    EksCluster(stack, "Eks", EksClusterProps(cfg=cfg, vpc=vpc, subnets=list(vpc.private_subnets)))
    template = Template.from_stack(stack).to_json()
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::EKS::Cluster"]
    assert cluster["Properties"]["Version"] == f"1.{minor}"
    layers = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion"]
    assert any(f"kubectl 1.{minor}." in str(r["Properties"].get("Description", "")) for r in layers), layers


def test_admin_principal_gets_cluster_admin_access_entry(tmp_path) -> None:
    arn = "arn:aws:iam::111122223333:role/Admin"
    cfg = config_from_dict({"cluster": {"admin_principal_arn": arn}})
    app = new_app(tmp_path)
    stack = cdk.Stack(app, "T", env=cdk.Environment(region="us-east-1"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-east-1a", "us-east-1b"])
    EksCluster(stack, "Eks", EksClusterProps(cfg=cfg, vpc=vpc, subnets=list(vpc.private_subnets)))
    entries = [
        e["Properties"]
        for e in Template.from_stack(stack).find_resources("AWS::EKS::AccessEntry").values()
        if e["Properties"]["PrincipalArn"] == arn
    ]
    (entry,) = entries
    assert "cluster-access-policy/AmazonEKSClusterAdminPolicy" in json.dumps(entry["AccessPolicies"][0]["PolicyArn"])
    assert entry["AccessPolicies"][0]["AccessScope"]["Type"] == "cluster"
