"""The self-managed GPU node group: an Auto Scaling group over an L1 launch template with every EFA card.

The L2 ``ec2.LaunchTemplate`` cannot express network interfaces or capacity reservations, and the
CDK's self-managed capacity helpers are Amazon Linux 2 only, so this construct writes the
``AWS::EC2::LaunchTemplate`` and ``AWS::AutoScaling::AutoScalingGroup`` itself, the way
terraform-aws-eks' self-managed node group module does.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnAutoScalingRollingUpdate, CfnAutoScalingScheduledAction, CfnUpdatePolicy, Fn
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from platform_config import ProjectConfig
from platform_config.schema import CapacityType
from stacks.compliance import acknowledge
from stacks.gpu_ami import gpu_ami_parameter_name
from stacks.gpu_user_data import ClusterConnection, mime_user_data
from stacks.node_role import eks_node_role

#: IMDS hop limit 1: a pod (one network hop further) cannot reach instance metadata, so it cannot take the node
#: role (which carries AmazonEKS_CNI_Policy). The pods that need AWS credentials get them from Pod Identity (FSx CSI
#: controller, CloudWatch agent, node termination handler); the CloudWatch agent runs with host networking.
IMDS_HOP_LIMIT = 1
#: Root device of the AL2023 EKS AMIs.
ROOT_DEVICE_NAME = "/dev/xvda"
#: Auto Scaling processes suspended while CloudFormation replaces nodes (the CloudFormation guide's list, with
#: ScheduledActions, which it requires when a group has both scheduled actions and rolling updates).
SUSPENDED_DURING_UPDATE = ["HealthCheck", "ReplaceUnhealthy", "AZRebalance", "AlarmNotification", "ScheduledActions"]
#: Time CloudFormation waits after replacing a node before the next one (a GPU node joins in a few minutes).
ROLLING_UPDATE_PAUSE = "PT10M"


def network_interfaces(cfg: ProjectConfig, security_group_ids: list[str]) -> list[dict]:
    """Launch-template ``NetworkInterfaces`` from the instance-type table (never hand-listed). The primary interface
    (card 0, device 0) says ``AssociatePublicIpAddress: false`` explicitly: the nodes live in private subnets."""
    out = []
    for nic in cfg.instance.network_interfaces():
        spec: dict = {
            "NetworkCardIndex": nic.network_card_index,
            "DeviceIndex": nic.device_index,
            "InterfaceType": nic.interface_type,
            "Groups": security_group_ids,
            "DeleteOnTermination": True,
        }
        if (nic.network_card_index, nic.device_index) == (0, 0):
            spec["AssociatePublicIpAddress"] = False
        out.append(spec)
    return out


def update_policy() -> CfnUpdatePolicy:
    """Replace nodes one at a time when the launch template changes (e.g. a new AMI release), never more than one
    node down, with scheduled actions suspended; and keep a size that a scheduled action or an operator set unless
    the template itself changes it (``IgnoreUnmodifiedGroupSizeProperties``)."""
    return CfnUpdatePolicy(
        auto_scaling_rolling_update=CfnAutoScalingRollingUpdate(
            max_batch_size=1,
            min_instances_in_service=0,
            pause_time=ROLLING_UPDATE_PAUSE,
            suspend_processes=SUSPENDED_DURING_UPDATE,
            wait_on_resource_signals=False,
        ),
        auto_scaling_scheduled_action=CfnAutoScalingScheduledAction(ignore_unmodified_group_size_properties=True),
    )


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
        desired_capacity: ``DesiredCapacity`` (``stacks.capacity_schedule.capacity_plan``); None leaves it out, so
            a new group starts at ``MinSize`` (a Capacity Block before it starts). Default None.
        tags: extra tags on the group and everything it launches (e.g. the node termination handler's). Default none.
    """

    cfg: ProjectConfig
    cluster: eks.ICluster
    connection: ClusterConnection
    subnet: ec2.ISubnet
    security_groups: list[ec2.ISecurityGroup]
    desired_capacity: int | None = None
    tags: tuple[tuple[str, str], ...] = ()


class GpuNodeGroup(Construct):
    """GPU nodes: AL2023 NVIDIA AMI (SSM, resolved at deploy), nodeadm user data, all EFA cards.

    * one interface per network card from ``InstanceType.network_interfaces()``, no public IP;
    * IMDSv2 required with hop limit 1, an encrypted gp3 root volume;
    * on-demand (in a cluster placement group), an ODCR (``capacity-reservation``) or a Capacity Block
      (``capacity-block``), both without a placement group of ours;
    * min/max from ``gpu_nodes.min_nodes`` / ``max_nodes``, desired from the capacity plan;
    * a rolling update policy (one node at a time) that leaves sizes set by scheduled actions alone;
    * node role with worker, CNI, ECR read and SSM policies and an ``EC2_LINUX`` access entry;
    * ``kubernetes.io/cluster/<name>=owned`` (and ``props.tags``) on the group and everything it launches.

    Attributes:
        role: the node IAM role.
        launch_template: the L1 launch template.
        auto_scaling_group: the L1 Auto Scaling group.
        placement_group: the cluster placement group, or None (ODCR, Capacity Block).
    """

    def __init__(self, scope: Construct, construct_id: str, props: GpuNodeGroupProps) -> None:
        super().__init__(scope, construct_id)
        cfg = props.cfg
        name = cfg.cluster.name
        group_tags = [
            {"key": "Name", "value": f"{name}-gpu"},
            {"key": f"kubernetes.io/cluster/{name}", "value": "owned"},
            *({"key": k, "value": v} for k, v in props.tags),
        ]

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
        self.placement_group: ec2.PlacementGroup | None = None
        if cfg.gpu_nodes.capacity.placement_group:
            self.placement_group = ec2.PlacementGroup(
                self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER
            )

        image_id = ssm.StringParameter.value_for_typed_string_parameter_v2(
            self, gpu_ami_parameter_name(cfg), ssm.ParameterValueType.AWS_EC2_IMAGE_ID
        )
        tags = [{"Key": t["key"], "Value": t["value"]} for t in group_tags]
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
            "Monitoring": {"Enabled": True},
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume", "network-interface")
            ],
            **capacity_options(cfg),
        }
        if self.placement_group is not None:
            self.launch_template_data["Placement"] = {"GroupName": self.placement_group.placement_group_name}
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
            desired_capacity=None if props.desired_capacity is None else str(props.desired_capacity),
            vpc_zone_identifier=[props.subnet.subnet_id],
            launch_template=autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty(
                launch_template_id=self.launch_template.ref,
                version=self.launch_template.attr_latest_version_number,
            ),
            tags=[
                autoscaling.CfnAutoScalingGroup.TagPropertyProperty(
                    key=t["key"], value=t["value"], propagate_at_launch=True
                )
                for t in group_tags
            ],
        )
        self.auto_scaling_group.cfn_options.update_policy = update_policy()
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
            "observability add-on, and every termination goes through the node termination handler's queue; "
            "Capacity Block scaling is scheduled, so SNS scaling notifications add nothing.",
        )
        # Nodes may only boot once their role can join the cluster.
        self.auto_scaling_group.node.add_dependency(self.access_entry)
