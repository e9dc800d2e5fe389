"""A small managed AL2023 node group for CoreDNS, the device-plugin controllers and add-on controllers."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from platform_config import ProjectConfig
from stacks.node_role import eks_node_role

#: Extra headroom above ``cluster.system_node_count`` for rolling updates.
MAX_SURGE_NODES = 1
#: IMDS hop limit of the system nodes: a pod (one hop further) cannot reach instance metadata, so no pod can take the
#: node role. What runs here and needs AWS credentials gets them without it: the FSx CSI controller, the CloudWatch
#: agent and the node termination handler through Pod Identity; vpc-cni, kube-proxy, the Pod Identity agent and the
#: FSx CSI node plugin run with host networking (zero hops).
IMDS_HOP_LIMIT = 1


@dataclass(frozen=True)
class SystemNodeGroupProps:
    """Inputs of :class:`SystemNodeGroup`.

    Attributes:
        cfg: the project configuration (``cluster.system_node_instance_type`` / ``system_node_count`` /
            ``system_node_labels``).
        cluster: the EKS cluster.
        subnets: private subnets the nodes spread over.
    """

    cfg: ProjectConfig
    cluster: eks.Cluster
    subnets: list[ec2.ISubnet]


class SystemNodeGroup(Construct):
    """EKS managed node group (AL2023 x86_64 standard AMI) with its own least-privilege node role.

    EKS creates the node role's ``EC2_LINUX`` access entry for managed node groups itself. The launch template sets
    only the instance metadata options (IMDSv2 required, hop limit :data:`IMDS_HOP_LIMIT`): it names no security
    group, so EKS still attaches the cluster security group, which the FSx file system admits (stacks/fsx_storage.py;
    the dataset-preparation Job mounts FSx here), and no AMI, so EKS still picks the AL2023 AMI and bootstraps it.

    Attributes:
        nodegroup: the managed node group.
        role: the node IAM role.
        launch_template: the metadata-options-only launch template.
    """

    def __init__(self, scope: Construct, construct_id: str, props: SystemNodeGroupProps) -> None:
        super().__init__(scope, construct_id)
        c = props.cfg.cluster
        self.role = eks_node_role(self, "NodeRole", f"EKS system nodes of {c.name}")
        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            http_endpoint=True,
            http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,
            http_put_response_hop_limit=IMDS_HOP_LIMIT,
        )
        self.nodegroup = props.cluster.add_nodegroup_capacity(
            "System",
            nodegroup_name=f"{c.name}-system",
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            instance_types=[ec2.InstanceType(c.system_node_instance_type)],
            min_size=c.system_node_count,
            desired_size=c.system_node_count,
            max_size=c.system_node_count + MAX_SURGE_NODES,
            subnets=ec2.SubnetSelection(subnets=props.subnets),
            node_role=self.role,
            labels=dict(c.system_node_labels),
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.launch_template_id,  # type: ignore[arg-type]
                version=self.launch_template.latest_version_number,
            ),
        )
