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


#: Taints the node lifecycle controller puts on a node that stops answering (NoExecute: bound pods are evicted
#: after their ``tolerationSeconds``; Kubernetes adds 300 s ones by default).
NODE_FAILURE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def tolerations(cfg: ProjectConfig) -> list[k8s.Toleration]:
    """The node-failure taints for ``job.node_failure_toleration_s`` (then the pod is evicted and its index
    replaced), and :func:`taint_tolerations`."""
    out = [
        k8s.Toleration(
            key=key, operator="Exists", effect="NoExecute", toleration_seconds=cfg.job.node_failure_toleration_s
        )
        for key in NODE_FAILURE_TAINTS
    ]
    return out + taint_tolerations(cfg)


def taint_tolerations(cfg: ProjectConfig) -> list[k8s.Toleration]:
    """One ``Equal`` (or ``Exists`` for value-less taints) toleration per ``gpu_nodes.node_taints`` entry: what any
    pod of the GPU nodes needs (the training pods, the image pre-pull DaemonSet)."""
    out = []
    for taint in cfg.gpu_nodes.node_taints:
        key, value, effect = parse_taint(taint)
        if value is None:
            out.append(k8s.Toleration(key=key, operator="Exists", effect=effect))
        else:
            out.append(k8s.Toleration(key=key, operator="Equal", value=value, effect=effect))
    return out
