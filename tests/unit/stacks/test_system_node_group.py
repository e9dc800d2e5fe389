"""The managed AL2023 system node group."""

from __future__ import annotations

from stacks.system_node_group import MAX_SURGE_NODES
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import only


def test_al2023_managed_nodegroup(any_env: Synthesized) -> None:
    ng = only(any_env.template_json(any_env.platform.cluster), "AWS::EKS::Nodegroup")["Properties"]
    c = any_env.cfg.cluster
    assert ng["AmiType"] == "AL2023_x86_64_STANDARD"
    assert ng["InstanceTypes"] == [c.system_node_instance_type]
    assert ng["ScalingConfig"] == {
        "MinSize": c.system_node_count,
        "DesiredSize": c.system_node_count,
        "MaxSize": c.system_node_count + MAX_SURGE_NODES,
    }
    assert ng["Labels"] == c.system_node_labels == {"node-group": "system"}
    # Its launch template names no security group (test_fsx_storage.py): EKS attaches the cluster security group.
    assert "RemoteAccess" not in ng
    assert "Taints" not in ng


def test_spreads_over_the_private_subnets(prod_env: Synthesized) -> None:
    ng = only(prod_env.template_json(prod_env.platform.cluster), "AWS::EKS::Nodegroup")["Properties"]
    assert sorted(ng["Subnets"]) == sorted(prod_env.cfg.network.private_subnets)


def test_imds_hop_limit_1_and_no_ami_or_user_data_of_ours(any_env: Synthesized) -> None:
    """Pods on the system nodes cannot reach instance metadata (hop limit 1, IMDSv2 only); EKS keeps choosing and
    bootstrapping the AMI."""
    tpl = any_env.template_json(any_env.platform.cluster)
    ng = only(tpl, "AWS::EKS::Nodegroup")["Properties"]
    data = tpl["Resources"][ng["LaunchTemplate"]["Id"]["Ref"]]["Properties"]["LaunchTemplateData"]
    options = {"HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1, "HttpTokens": "required"}
    assert data["MetadataOptions"] == options
    assert not {"ImageId", "UserData"} & data.keys()
    assert ng["AmiType"] == "AL2023_x86_64_STANDARD"


def test_no_add_on_needs_instance_metadata_behind_hop_limit_1(any_env: Synthesized) -> None:
    """With hop limit 1 only host-networked pods reach IMDS: every add-on that calls AWS from an ordinary pod has a
    Pod Identity association; the others are host-networked (vpc-cni, kube-proxy, the Pod Identity agent) or call no
    AWS API (CoreDNS; the node monitoring agent, which reports node conditions through the Kubernetes API)."""
    from tests.unit.stacks.conftest import resources

    addons = resources(any_env.template_json(any_env.platform.cluster), "AWS::EKS::Addon").values()
    with_identity = {a["Properties"]["AddonName"] for a in addons if a["Properties"].get("PodIdentityAssociations")}
    others = {a["Properties"]["AddonName"] for a in addons} - with_identity
    assert with_identity == {"aws-fsx-csi-driver", "amazon-cloudwatch-observability"}
    assert others == {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent", "eks-node-monitoring-agent"}
