"""nodeSelector and tolerations that put training pods on the CDK GPU node group, and only there."""

from __future__ import annotations

from cdk8s_plus_36 import k8s

from platform_config import InstanceType, ProjectConfig

#: Well-known label the kubelet sets from the EC2 instance type.
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def node_selector(cfg: ProjectConfig, instance: InstanceType) -> dict[str, str]:
    """The node group's own labels (``gpu_nodes.node_labels``) plus the instance type."""
    return {**cfg.gpu_nodes.node_labels, INSTANCE_TYPE_LABEL: instance.name}


def parse_taint(taint: str) -> tuple[str, str | None, str]:
    """``key[=value]:Effect`` (kubelet ``--register-with-taints`` syntax) -> (key, value, effect)."""
    spec, effect = taint.rsplit(":", 1)
    key, _, value = spec.partition("=")
    return key, (value if "=" in spec else None), effect


def tolerations(cfg: ProjectConfig) -> list[k8s.Toleration]:
    """One ``Equal`` (or ``Exists`` for value-less taints) toleration per ``gpu_nodes.node_taints`` entry."""
    out = []
    for taint in cfg.gpu_nodes.node_taints:
        key, value, effect = parse_taint(taint)
        if value is None:
            out.append(k8s.Toleration(key=key, operator="Exists", effect=effect))
        else:
            out.append(k8s.Toleration(key=key, operator="Equal", value=value, effect=effect))
    return out
