"""``<name>-cluster``: network, EKS control plane, add-ons, device plugins, the system node group, observability.

The GPU node group lives in ``<name>-gpu`` (stacks/gpu_stack.py): no template holds both the cluster and GPU
capacity, so a failed GPU launch cannot roll the cluster back.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from platform_config import ProjectConfig
from stacks.addons import Addons, AddonsProps
from stacks.alarm_topic import AlarmTopic, AlarmTopicProps
from stacks.cluster import EksCluster, EksClusterProps
from stacks.device_plugins import DevicePlugins, DevicePluginsProps
from stacks.log_retention import LogRetention, LogRetentionProps
from stacks.network import Network, NetworkProps
from stacks.observability import Observability, ObservabilityProps
from stacks.system_node_group import SystemNodeGroup, SystemNodeGroupProps


class ClusterStack(Stack):
    """The long-lived platform without GPU capacity. Outputs ``ClusterName`` and ``UpdateKubeconfigCommand``."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: ProjectConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.network = Network(self, "Network", NetworkProps(cfg=cfg))
        self.logs = LogRetention(self, "Logs", LogRetentionProps(cfg=cfg))
        self.eks = EksCluster(
            self, "Eks", EksClusterProps(cfg=cfg, vpc=self.network.vpc, subnets=self.network.private_subnets)
        )
        cluster = self.eks.cluster
        cluster.node.add_dependency(self.logs.control_plane)  # EKS must find the group, not create it
        self.alarm_topic = AlarmTopic(self, "AlarmTopic", AlarmTopicProps(cfg=cfg))
        self.system_nodes = SystemNodeGroup(
            self, "SystemNodes", SystemNodeGroupProps(cfg=cfg, cluster=cluster, subnets=self.network.private_subnets)
        )
        self.addons = Addons(
            self, "Addons", AddonsProps(cfg=cfg, cluster=cluster, system_nodes=self.system_nodes.nodegroup)
        )
        for addon in self.addons.before_compute:
            self.system_nodes.nodegroup.node.add_dependency(addon)
        self.device_plugins = DevicePlugins(
            self, "DevicePlugins", DevicePluginsProps(cfg=cfg, cluster=cluster, after=[self.system_nodes.nodegroup])
        )
        for group in self.logs.container_groups:
            self.system_nodes.nodegroup.node.add_dependency(group)  # before Fluent Bit can create it
        self.observability = Observability(
            self,
            "Observability",
            ObservabilityProps(
                cfg=cfg,
                cluster=cluster,
                depends_on=[self.system_nodes.nodegroup],
                addon_version=cfg.cluster.addon_versions["amazon-cloudwatch-observability"],
                alarm_topic=self.alarm_topic.topic,
            ),
        )

        CfnOutput(self, "ClusterName", value=cluster.cluster_name, description="EKS cluster name")
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --region {self.region} --name {cluster.cluster_name}",
            description="Point kubectl at the cluster",
        )
