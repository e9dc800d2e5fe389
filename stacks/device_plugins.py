"""NVIDIA and EFA Kubernetes device plugins, as Helm charts with versions pinned in ``cfg.helm``."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IDependable

from platform_config import ProjectConfig
from stacks.gpu_user_data import EFA_PRESENT_LABEL, gpu_node_labels, gpu_node_tolerations
from stacks.helm_releases import EFA_CHART, EFA_REPOSITORY, NVIDIA_CHART, NVIDIA_REPOSITORY

NAMESPACE = "kube-system"


def nvidia_values(cfg: ProjectConfig) -> dict:
    """Helm values of the NVIDIA plugin: only on the GPU nodes (by their kubelet labels), MOFED off."""
    match = [{"key": k, "operator": "In", "values": [v]} for k, v in gpu_node_labels(cfg).items()]
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": match}]}
            }
        },
        "tolerations": gpu_node_tolerations(cfg),
        # 0.19.0-0.19.2 turned MOFED on by default, clashing with the EFA plugin; pin it off whatever the version.
        "mofedEnabled": False,
    }


def efa_values(cfg: ProjectConfig) -> dict:
    """Helm values of the EFA plugin: EFA nodes of the configured instance type only, tolerating the GPU taint."""
    return {
        "nodeSelector": {EFA_PRESENT_LABEL: "true"},
        "supportedInstanceLabels": {
            "keys": ["node.kubernetes.io/instance-type"],
            "values": [cfg.gpu_nodes.instance_type],
        },
        "tolerations": gpu_node_tolerations(cfg),
    }


@dataclass(frozen=True)
class DevicePluginsProps:
    """Inputs of :class:`DevicePlugins`.

    Attributes:
        cfg: the project configuration (``helm.nvidia_device_plugin`` / ``helm.efa_device_plugin``).
        cluster: the EKS cluster (its kubectl provider runs Helm).
        after: constructs the charts wait for (the system nodes, so Helm finds a working cluster).
    """

    cfg: ProjectConfig
    cluster: eks.Cluster
    after: list[IDependable]


class DevicePlugins(Construct):
    """The two DaemonSets that advertise ``nvidia.com/gpu`` and ``vpc.amazonaws.com/efa`` on GPU nodes.

    Attributes:
        nvidia: the NVIDIA device plugin chart.
        efa: the EFA device plugin chart.
    """

    def __init__(self, scope: Construct, construct_id: str, props: DevicePluginsProps) -> None:
        super().__init__(scope, construct_id)
        cfg = props.cfg
        self.nvidia = self._chart(
            "Nvidia", props, NVIDIA_CHART, NVIDIA_REPOSITORY, cfg.helm.nvidia_device_plugin, nvidia_values(cfg)
        )
        self.efa = self._chart("Efa", props, EFA_CHART, EFA_REPOSITORY, cfg.helm.efa_device_plugin, efa_values(cfg))
        for chart in (self.nvidia, self.efa):
            for dep in props.after:
                chart.node.add_dependency(dep)

    def _chart(
        self, construct_id: str, props: DevicePluginsProps, chart: str, repository: str, version: str, values: dict
    ) -> eks.HelmChart:
        """One chart in ``kube-system``, released under the chart's name."""
        return eks.HelmChart(
            self,
            construct_id,
            cluster=props.cluster,
            chart=chart,
            repository=repository,
            version=version,
            namespace=NAMESPACE,
            release=chart,
            values=values,
        )
