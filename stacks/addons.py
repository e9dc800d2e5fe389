"""EKS managed add-ons: vpc-cni, kube-proxy, CoreDNS, the Pod Identity agent, the FSx CSI driver and the node
monitoring agent."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from platform_config import ProjectConfig
from stacks.compliance import acknowledge
from stacks.gpu_user_data import gpu_node_tolerations

#: Service account of the FSx CSI controller (fixed by the add-on).
FSX_CSI_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
FSX_CSI_NAMESPACE = "kube-system"
#: Sets ``AcceleratedHardwareReady`` on a GPU fault (NVIDIA XIDs in the kernel log, DCGM diagnostics), which the
#: fencing agent's GPU rule reads (:mod:`stacks.node_fencing`).
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"


def node_monitoring_values(cfg: ProjectConfig) -> dict:
    """The node monitoring agent's configuration values: its DCGM host engine DaemonSet tolerates the GPU nodes' taint
    (the add-on's default is none, so it would never run where the GPUs are; the node agent itself tolerates every
    taint by default). Keys of the add-on's schema (github.com/aws/eks-node-monitoring-agent,
    charts/configuration.schema.json: ``dcgmAgent.tolerations``)."""
    return {"dcgmAgent": {"tolerations": gpu_node_tolerations(cfg)}}


@dataclass(frozen=True)
class AddonsProps:
    """Inputs of :class:`Addons`.

    Attributes:
        cfg: the project configuration (``cluster.addon_versions``: name -> pinned version, every add-on).
        cluster: the EKS cluster.
        system_nodes: CoreDNS and the FSx CSI controller wait for these nodes (their pods need somewhere to run).
    """

    cfg: ProjectConfig
    cluster: eks.Cluster
    system_nodes: IDependable


class Addons(Construct):
    """The managed add-ons, ordered like terraform-aws-eks' ``before_compute``.

    vpc-cni and kube-proxy are created before any node (nodes only turn Ready with a CNI); CoreDNS
    and the FSx CSI driver after the system node group. The FSx CSI controller gets an IAM role
    through a Pod Identity association (the agent add-on is created first). The node monitoring agent (a DaemonSet on
    every node, DCGM on the GPU nodes) after the system node group. Versions come from
    ``cluster.addon_versions``, which pins every add-on for the cluster's Kubernetes minor
    (``platform_config.versions``; vpc-cni >= v1.18.5, which efa-only interfaces need).

    Attributes:
        addons: add-on name -> construct.
        fsx_csi_role: the role of the FSx CSI controller.
    """

    def __init__(self, scope: Construct, construct_id: str, props: AddonsProps) -> None:
        super().__init__(scope, construct_id)
        cluster = props.cluster
        versions = props.cfg.cluster.addon_versions
        self.addons: dict[str, eks.Addon] = {}

        def addon(name: str, *deps: IDependable, configuration: dict | None = None) -> eks.Addon:
            a = eks.Addon(
                self,
                name,
                cluster=cluster,
                addon_name=name,
                addon_version=versions[name],
                configuration_values=configuration,
            )
            cfn = a.node.default_child
            cfn.add_property_override("ResolveConflicts", "OVERWRITE")  # type: ignore[union-attr]
            for d in deps:
                a.node.add_dependency(d)
            self.addons[name] = a
            return a

        addon("vpc-cni")
        addon("kube-proxy")
        addon("coredns", props.system_nodes)
        agent = cluster.eks_pod_identity_agent
        if agent is not None:
            # aws_eks_v2 creates the agent add-on itself; pin its version like the others.
            agent.node.default_child.add_property_override(  # type: ignore[union-attr]
                "AddonVersion", versions["eks-pod-identity-agent"]
            )
            self.addons["eks-pod-identity-agent"] = agent  # type: ignore[assignment]

        self.fsx_csi_role = iam.Role(
            self,
            "FsxCsiRole",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")),
            description="FSx CSI controller (static volumes only: describe file systems)",
        )
        self.fsx_csi_role.add_to_policy(iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"]))
        acknowledge(
            self.fsx_csi_role,
            "AwsSolutions-IAM5[Resource::*]",
            "fsx:DescribeFileSystems supports no resource-level permissions; it is the role's only action.",
        )
        fsx = addon("aws-fsx-csi-driver", props.system_nodes, *([agent] if agent is not None else []))
        fsx.node.default_child.add_property_override(  # type: ignore[union-attr]
            "PodIdentityAssociations",
            [{"ServiceAccount": FSX_CSI_SERVICE_ACCOUNT, "RoleArn": self.fsx_csi_role.role_arn}],
        )
        addon(NODE_MONITORING_AGENT, props.system_nodes, configuration=node_monitoring_values(props.cfg))

    @property
    def before_compute(self) -> list[eks.Addon]:
        """Add-ons every node needs before it can turn Ready."""
        return [self.addons["vpc-cni"], self.addons["kube-proxy"]]
