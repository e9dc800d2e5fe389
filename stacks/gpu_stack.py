"""``<name>-gpu``: the GPU node group in its own stack, so that capacity can never roll back the cluster.

On-demand p5 capacity is often short and a Capacity Block cannot launch before it starts: when the GPU Auto Scaling
group fails, only this stack rolls back. It holds the EFA security group, the self-managed GPU node group, the
Capacity Block schedule and the node termination handler; it depends on ``<name>-cluster`` (cluster, network,
add-ons) and nothing depends on it.
"""

from __future__ import annotations

from datetime import datetime

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from platform_config import ProjectConfig
from stacks.capacity_schedule import CapacitySchedule, CapacityScheduleProps, capacity_plan
from stacks.cluster_stack import ClusterStack
from stacks.efa_security_group import EfaSecurityGroup, EfaSecurityGroupProps
from stacks.gpu_node_group import GpuNodeGroup, GpuNodeGroupProps
from stacks.gpu_user_data import ClusterConnection
from stacks.node_fencing import NodeFencing, NodeFencingProps
from stacks.node_termination_handler import MANAGED_TAG, NodeTerminationHandler, NodeTerminationHandlerProps


class GpuStack(Stack):
    """GPU capacity. Outputs ``GpuAutoScalingGroupName`` and ``NodeTerminationQueueUrl``.

    ``now`` (timezone-aware) decides which Capacity Block actions are still in the future
    (``stacks.capacity_schedule``); ``stacks.platform_app`` passes the synthesis time or ``-c now=<ISO 8601>``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cfg: ProjectConfig,
        platform: ClusterStack,
        now: datetime,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        cluster = platform.eks.cluster
        self.efa = EfaSecurityGroup(
            self, "EfaSecurityGroup", EfaSecurityGroupProps(vpc=platform.network.vpc, cluster_name=cfg.cluster.name)
        )
        self.plan = capacity_plan(cfg, now)
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
                subnet=platform.network.gpu_subnet,
                security_groups=[cluster.cluster_security_group, self.efa.security_group],
                desired_capacity=self.plan.desired,
                tags=((MANAGED_TAG, "true"),),
            ),
        )
        group = self.gpu_nodes.auto_scaling_group
        for addon in platform.addons.before_compute:
            group.node.add_dependency(addon)
        self.schedule = CapacitySchedule(
            self, "CapacitySchedule", CapacityScheduleProps(cfg=cfg, plan=self.plan, auto_scaling_group=group)
        )
        self.termination_handler = NodeTerminationHandler(
            self,
            "NodeTerminationHandler",
            NodeTerminationHandlerProps(cfg=cfg, cluster=cluster, auto_scaling_group=group),
        )
        self.fencing = NodeFencing(
            self,
            "NodeFencing",
            NodeFencingProps(
                cfg=cfg,
                cluster=cluster,
                vpc=platform.network.vpc,
                subnets=tuple(platform.network.private_subnets),
                auto_scaling_group=group,
                lifecycle_hook=self.termination_handler.lifecycle_hook,
            ),
        )
        CfnOutput(self, "GpuAutoScalingGroupName", value=group.ref, description="GPU Auto Scaling group")
        CfnOutput(
            self,
            "NodeTerminationQueueUrl",
            value=self.termination_handler.queue.queue_url,
            description="SQS queue of the node termination handler",
        )
