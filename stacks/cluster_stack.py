"""``<name>-cluster``: network, EKS control plane, add-ons, device plugins, system and GPU node groups."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from platform_config import ProjectConfig
from stacks.addons import Addons, AddonsProps
from stacks.cluster import EksCluster, EksClusterProps
from stacks.device_plugins import DevicePlugins, DevicePluginsProps
from stacks.efa_security_group import EfaSecurityGroup, EfaSecurityGroupProps
from stacks.gpu_node_group import GpuNodeGroup, GpuNodeGroupProps
from stacks.gpu_user_data import ClusterConnection
from stacks.network import Network, NetworkProps
from stacks.observability import Observability, ObservabilityProps
from stacks.system_node_group import SystemNodeGroup, SystemNodeGroupProps


class ClusterStack(Stack):
    """The long-lived compute platform. Outputs ``ClusterName`` and ``UpdateKubeconfigCommand``."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: ProjectConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.network = Network(self, "Network", NetworkProps(cfg=cfg))
        self.eks = EksCluster(
            self, "Eks", EksClusterProps(cfg=cfg, vpc=self.network.vpc, subnets=self.network.private_subnets)
        )
        cluster = self.eks.cluster
        self.system_nodes = SystemNodeGroup(
            self, "SystemNodes", SystemNodeGroupProps(cfg=cfg, cluster=cluster, subnets=self.network.private_subnets)
        )
        self.addons = Addons(
            self, "Addons", AddonsProps(cfg=cfg, cluster=cluster, system_nodes=self.system_nodes.nodegroup)
        )
        for addon in self.addons.before_compute:
            self.system_nodes.nodegroup.node.add_dependency(addon)
        self.efa = EfaSecurityGroup(
            self, "EfaSecurityGroup", EfaSecurityGroupProps(vpc=self.network.vpc, cluster_name=cfg.cluster.name)
        )
        self.gpu_nodes = GpuNodeGroup(
            self,
            "GpuNodes",
            GpuNodeGroupProps(
                cfg=cfg,
                cluster=cluster,
                connection=ClusterConnection(
                    name=cluster.cluster_name,
                    endpoint=cluster.cluster_endpoint,
                    certificate_authority=cluster.cluster_certificate_authority_data,
                    service_cidr=cfg.cluster.service_ipv4_cidr,
                ),
                subnet=self.network.gpu_subnet,
                security_groups=[cluster.cluster_security_group, self.efa.security_group],
            ),
        )
        for addon in self.addons.before_compute:
            self.gpu_nodes.auto_scaling_group.node.add_dependency(addon)
        self.device_plugins = DevicePlugins(
            self, "DevicePlugins", DevicePluginsProps(cfg=cfg, cluster=cluster, after=[self.system_nodes.nodegroup])
        )
        self.observability = Observability(
            self,
            "Observability",
            ObservabilityProps(
                cfg=cfg,
                cluster=cluster,
                depends_on=[self.system_nodes.nodegroup],
                addon_version=cfg.cluster.addon_versions["amazon-cloudwatch-observability"],
            ),
        )

        CfnOutput(self, "ClusterName", value=cluster.cluster_name, description="EKS cluster name")
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --region {self.region} --name {cluster.cluster_name}",
            description="Point kubectl at the cluster",
        )
