"""The self-managed GPU node group: an Auto Scaling group over an L1 launch template with every EFA card.

The L2 ``ec2.LaunchTemplate`` cannot express network interfaces or capacity reservations, and the
CDK's self-managed capacity helpers are Amazon Linux 2 only, so this construct writes the
``AWS::EC2::LaunchTemplate`` and ``AWS::AutoScaling::AutoScalingGroup`` itself, the way
terraform-aws-eks' self-managed node group module does.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Fn
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from platform_config import ProjectConfig
from platform_config.schema import CapacityType
from stacks.compliance import acknowledge
from stacks.gpu_user_data import ClusterConnection, mime_user_data
from stacks.node_role import eks_node_role

#: IMDS hop limit 2, as the Container Insights guide asks for with IMDSv2: the observability add-on's
#: DaemonSets read instance metadata from their pods. IMDSv2 (session tokens) stays mandatory.
IMDS_HOP_LIMIT = 2
#: Root device of the AL2023 EKS AMIs.
ROOT_DEVICE_NAME = "/dev/xvda"


def gpu_ami_parameter_name(cfg: ProjectConfig) -> str:
    """SSM parameter of the recommended AL2023 NVIDIA EKS AMI for the cluster's Kubernetes minor."""
    return (
        f"/aws/service/eks/optimized-ami/{cfg.cluster.kubernetes_version}/amazon-linux-2023/x86_64/nvidia/"
        "recommended/image_id"
    )


def network_interfaces(cfg: ProjectConfig, security_group_ids: list[str]) -> list[dict]:
    """Launch-template ``NetworkInterfaces`` from the instance-type table (never hand-listed)."""
    return [
        {
            "NetworkCardIndex": nic.network_card_index,
            "DeviceIndex": nic.device_index,
            "InterfaceType": nic.interface_type,
            "Groups": security_group_ids,
            "DeleteOnTermination": True,
        }
        for nic in cfg.instance.network_interfaces()
    ]


def capacity_options(cfg: ProjectConfig) -> dict:
    """``CapacityReservationSpecification`` / ``InstanceMarketOptions`` for ``gpu_nodes.capacity``."""
    cap = cfg.gpu_nodes.capacity
    if cap.type is CapacityType.ON_DEMAND:
        return {}
    out: dict = {
        "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": cap.reservation_id}}
    }
    if cap.type is CapacityType.CAPACITY_BLOCK:
        out["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    return out


@dataclass(frozen=True)
class GpuNodeGroupProps:
    """Inputs of :class:`GpuNodeGroup`.

    Attributes:
        cfg: the project configuration (``gpu_nodes.*``, ``cluster.kubernetes_version``).
        cluster: the EKS cluster (the node role gets an ``EC2_LINUX`` access entry on it).
        connection: name, endpoint, CA and service CIDR for the NodeConfig.
        subnet: the single subnet in ``aws.availability_zone``.
        security_groups: attached to every interface: the cluster security group and the EFA group.
    """

    cfg: ProjectConfig
    cluster: eks.ICluster
    connection: ClusterConnection
    subnet: ec2.ISubnet
    security_groups: list[ec2.ISecurityGroup]


class GpuNodeGroup(Construct):
    """GPU nodes: AL2023 NVIDIA AMI (SSM, resolved at deploy), nodeadm user data, all EFA cards.

    * one interface per network card from ``InstanceType.network_interfaces()``;
    * a cluster placement group, IMDSv2 required, an encrypted gp3 root volume;
    * on-demand, an ODCR (``capacity-reservation``) or a Capacity Block (``capacity-block``);
    * min/desired/max from ``gpu_nodes.min_nodes`` / ``node_count`` / ``max_nodes``;
    * node role with worker, CNI, ECR read and SSM policies and an ``EC2_LINUX`` access entry;
    * ``kubernetes.io/cluster/<name>=owned`` on the group and everything it launches.

    Attributes:
        role: the node IAM role.
        launch_template: the L1 launch template.
        auto_scaling_group: the L1 Auto Scaling group.
        placement_group: the cluster placement group.
    """

    def __init__(self, scope: Construct, construct_id: str, props: GpuNodeGroupProps) -> None:
        super().__init__(scope, construct_id)
        cfg = props.cfg
        name = cfg.cluster.name
        owned = {"key": f"kubernetes.io/cluster/{name}", "value": "owned"}
        node_name = {"key": "Name", "value": f"{name}-gpu"}

        self.role = eks_node_role(self, "NodeRole", f"EKS self-managed GPU nodes of {name}")
        profile = iam.CfnInstanceProfile(self, "InstanceProfile", roles=[self.role.role_name])
        self.access_entry = eks.AccessEntry(
            self,
            "NodeAccessEntry",
            cluster=props.cluster,
            principal=self.role.role_arn,
            access_entry_type=eks.AccessEntryType.EC2_LINUX,
            access_policies=[],
        )
        self.placement_group = ec2.PlacementGroup(self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER)

        image_id = ssm.StringParameter.value_for_typed_string_parameter_v2(
            self, gpu_ami_parameter_name(cfg), ssm.ParameterValueType.AWS_EC2_IMAGE_ID
        )
        tags = [{"Key": t["key"], "Value": t["value"]} for t in (node_name, owned)]
        self.launch_template_data: dict = {
            "ImageId": image_id,
            "InstanceType": cfg.gpu_nodes.instance_type,
            "IamInstanceProfile": {"Arn": profile.attr_arn},
            "UserData": Fn.base64(mime_user_data(cfg, props.connection)),
            "MetadataOptions": {
                "HttpEndpoint": "enabled",
                "HttpTokens": "required",
                "HttpPutResponseHopLimit": IMDS_HOP_LIMIT,
            },
            "BlockDeviceMappings": [
                {
                    "DeviceName": ROOT_DEVICE_NAME,
                    "Ebs": {
                        "VolumeSize": cfg.gpu_nodes.root_volume_gib,
                        "VolumeType": "gp3",
                        "Encrypted": True,
                        "DeleteOnTermination": True,
                    },
                }
            ],
            "NetworkInterfaces": network_interfaces(cfg, [sg.security_group_id for sg in props.security_groups]),
            "Placement": {"GroupName": self.placement_group.placement_group_name},
            "Monitoring": {"Enabled": True},
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume", "network-interface")
            ],
            **capacity_options(cfg),
        }
        # The raw CloudFormation shape (PascalCase) is written as an override: jsii drops plain dicts
        # passed as the typed ``launch_template_data`` struct.
        self.launch_template = ec2.CfnLaunchTemplate(
            self, "LaunchTemplate", launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty()
        )
        self.launch_template.add_property_override("LaunchTemplateData", self.launch_template_data)
        nodes = cfg.gpu_nodes
        self.auto_scaling_group = autoscaling.CfnAutoScalingGroup(
            self,
            "AutoScalingGroup",
            auto_scaling_group_name=f"{name}-gpu",
            min_size=str(nodes.min_nodes),
            max_size=str(nodes.max_nodes),
            desired_capacity=str(nodes.node_count),
            vpc_zone_identifier=[props.subnet.subnet_id],
            launch_template=autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty(
                launch_template_id=self.launch_template.ref,
                version=self.launch_template.attr_latest_version_number,
            ),
            tags=[
                autoscaling.CfnAutoScalingGroup.TagPropertyProperty(
                    key=t["key"], value=t["value"], propagate_at_launch=True
                )
                for t in (node_name, owned)
            ],
        )
        acknowledge(
            self.auto_scaling_group,
            "AwsSolutions-EC26",
            "The launch template's only EBS volume (the root) sets Encrypted: true; the rule does not follow "
            "an L1 launch template (tests/unit/stacks/test_gpu_node_group.py asserts the encryption).",
        )
        acknowledge(
            self.auto_scaling_group,
            "AwsSolutions-AS3",
            "GPU node launches and terminations surface as Kubernetes node events and in the CloudWatch "
            "observability add-on; Capacity Block scale-in is scheduled, so SNS scaling notifications add nothing.",
        )
        # Nodes may only boot once their role can join the cluster.
        self.auto_scaling_group.node.add_dependency(self.access_entry)
