"""make preflight: the checks' logic on kubectl / AWS CLI JSON, the probe pods, and a clean skip without a cluster.

The JSON under preflight/ has the shape of ``kubectl get ... -o json`` and ``aws ... --output json`` output
(List objects, status fields as the API server and AWS return them); it was written for these tests, not captured
from a live cluster, which this repository has no access to.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest

from platform_config import load_config
from scripts import preflight as pf
from scripts.preflight import (
    Result,
    addon_versions_check,
    capacity_reservation_check,
    gpu_nodes_check,
    probe_pod,
    probe_results,
    pvc_check,
    quantity,
    workloads_ready_check,
)

DATA = Path(__file__).parent / "preflight"
REPO = Path(__file__).resolve().parents[3]


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_quantities() -> None:
    assert quantity("10256Mi") == 10256 * 2**20
    assert quantity("8") == 8 and quantity("191450m") == pytest.approx(191.45)
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity("lots")


def test_gpu_nodes_ready_with_everything_the_pod_requests() -> None:
    results = gpu_nodes_check(load("nodes.json"), load_config())
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert results[0].detail.startswith("2 of 2 p5.48xlarge nodes registered")
    assert results[1] == Result(
        "node:ip-10-0-32-11.ec2.internal",
        "ok",
        "Ready; nvidia.com/gpu=8, vpc.amazonaws.com/efa=32, hugepages-2Mi=10256Mi",
    )


def test_missing_allocatable_is_named() -> None:
    nodes = load("nodes.json")
    alloc = nodes["items"][0]["status"]["allocatable"]
    alloc["vpc.amazonaws.com/efa"] = "0"  # the EFA device plugin has not registered the devices
    del alloc["hugepages-2Mi"]
    nodes["items"][1]["status"]["conditions"][-1]["status"] = "False"
    results = gpu_nodes_check(nodes, load_config())
    assert results[1] == Result(
        "node:ip-10-0-32-11.ec2.internal", "FAIL", "allocatable vpc.amazonaws.com/efa 0 < 32, hugepages-2Mi 0 < 5120Mi"
    )
    assert results[2] == Result("node:ip-10-0-32-12.ec2.internal", "FAIL", "not Ready")


def test_too_few_gpu_nodes() -> None:
    nodes = load("nodes.json")
    nodes["items"] = nodes["items"][2:]  # only system nodes: capacity not there yet
    (result,) = gpu_nodes_check(nodes, load_config())
    assert result.status == "FAIL" and result.detail.startswith("0 of 2 p5.48xlarge nodes registered")


def test_plugins_and_termination_handler_ready() -> None:
    results = workloads_ready_check(load("daemonsets.json"), load("deployments.json"), gpu_nodes=2)
    assert results == [
        Result("nvidia-device-plugin", "ok", "2 ready of 2 scheduled"),
        Result("aws-efa-k8s-device-plugin", "ok", "2 ready of 2 scheduled"),
        Result("aws-node-termination-handler", "ok", "1 of 1 replicas ready"),
    ]


def test_plugin_not_on_every_gpu_node_fails() -> None:
    daemonsets = load("daemonsets.json")
    daemonsets["items"][2]["status"]["numberReady"] = 1
    deployments = {"items": []}
    results = workloads_ready_check(daemonsets, deployments, gpu_nodes=2)
    assert results[1] == Result("aws-efa-k8s-device-plugin", "FAIL", "1 ready of 2 scheduled; 2 GPU nodes")
    assert results[2] == Result(
        "aws-node-termination-handler", "FAIL", "no Deployment of this Helm release in kube-system"
    )


def test_pvc_bound_to_the_static_pv() -> None:
    cfg = load_config()
    assert pvc_check(load("pvc.json"), cfg) == Result("pvc:fsx-lustre", "ok", "Bound to fsx-lustre-pv")
    pending = copy.deepcopy(load("pvc.json"))
    pending["status"]["phase"] = "Pending"
    assert pvc_check(pending, cfg).status == "FAIL"


@pytest.mark.parametrize("group", ["gpu", "system"])
def test_probe_pods_validate_and_mount_fsx(group: str) -> None:
    cfg = load_config()
    pod = probe_pod(cfg, "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1", group)
    kubernetes_validate.validate(pod, f"{cfg.cluster.kubernetes_version}.0", strict=True)
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["volumeMounts"] == [{"name": "fsx", "mountPath": "/checkpoints"}]
    assert spec["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-lustre"}}]
    assert spec["automountServiceAccountToken"] is False
    assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "/checkpoints/preflight" in container["command"]


def test_gpu_probe_runs_like_the_training_pod() -> None:
    cfg = load_config()
    spec = probe_pod(cfg, "img", "gpu")["spec"]
    (container,) = spec["containers"]
    # the training container's context: Pod Security baseline, no capability added (charts/pod_security.py)
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["nodeSelector"] == {
        "workload": "training",
        "node-group": "gpu-efa",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
    }
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert container["command"][:3] == ["python3", "/opt/image/checks.py", "runtime"]
    assert "nvidia.com/gpu" not in container["resources"]["requests"]  # runs beside a training pod


def test_system_probe_checks_fsx_only() -> None:
    spec = probe_pod(load_config(), "img", "system")["spec"]
    assert spec["nodeSelector"] == {"node-group": "system"} and "tolerations" not in spec
    assert spec["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    with pytest.raises(ValueError, match="gpu or system"):
        probe_pod(load_config(), "img", "cpu")


def test_system_probe_script_runs(tmp_path: Path) -> None:
    """The inline FSx-only probe runs against image/checks.py (here the directory is not on lustre, so it fails)."""
    script = pf.FSX_ONLY_PROBE.replace("/opt/image", str(REPO / "image"))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    (result,) = probe_results("system", done.stdout)
    assert (result.name, result.status) == ("system:fsx-io", "FAIL")
    assert result.detail.startswith(f"{tmp_path} is on ") and result.detail.endswith(", not lustre")


def test_probe_log_parsing() -> None:
    log = (
        "CHECK ulimit-l ok unlimited\n"
        "CHECK fsx-io FAIL /checkpoints/preflight: Permission denied\n"
        "CHECKS FAILED: fsx-io (2 checks)\n"
    )
    assert probe_results("gpu", log) == [
        Result("gpu:ulimit-l", "ok", "unlimited"),
        Result("gpu:fsx-io", "FAIL", "/checkpoints/preflight: Permission denied"),
    ]
    cut = probe_results("gpu", "CHECK ulimit-l ok unlimited\nexec format error\n")
    assert cut[-1] == Result("gpu:probe", "FAIL", "did not finish: CHECK ulimit-l ok unlimited | exec format error")


def test_addon_pins_against_describe_addon_versions() -> None:
    cfg = load_config()
    described = {"kube-proxy": load("describe-addon-versions.kube-proxy.json")}
    results = {r.name: r for r in addon_versions_check(described, cfg)}
    assert results["addon:kube-proxy"] == Result(
        "addon:kube-proxy", "ok", "v1.36.0-eksbuild.21 is offered for Kubernetes 1.36"
    )
    assert results["addon:coredns"].status == "FAIL"  # nothing described for it
    old = load_config().model_copy(deep=True)
    pinned = {**old.cluster.addon_versions, "kube-proxy": "v1.36.0-eksbuild.1"}
    cfg2 = old.model_copy(update={"cluster": old.cluster.model_copy(update={"addon_versions": pinned})})
    bad = {r.name: r for r in addon_versions_check(described, cfg2)}["addon:kube-proxy"]
    assert (
        bad.detail == "v1.36.0-eksbuild.1 is not offered for Kubernetes 1.36; newest offered: ['v1.36.0-eksbuild.21']"
    )


def test_capacity_block_matches_the_configuration() -> None:
    cfg = load_config(env="prod")
    (result,) = capacity_reservation_check(load("describe-capacity-reservations.json"), cfg)
    assert result == Result("reservation:cr-0123456789abcdef0", "ok", "scheduled, 9 x p5.48xlarge in us-west-2b")


def test_capacity_block_mismatches_are_named() -> None:
    cfg = load_config(env="prod")
    described = load("describe-capacity-reservations.json")
    r = described["CapacityReservations"][0]
    r.update(AvailabilityZone="us-west-2a", EndDate="2027-01-17T11:30:00+00:00", TotalInstanceCount=4)
    (result,) = capacity_reservation_check(described, cfg)
    assert result.status == "FAIL"
    assert result.detail == (
        "AZ us-west-2a (config aws.availability_zone us-west-2b); 4 instances < 9 (node_count 8 + spare_nodes 1); "
        "EndDate 2027-01-17T11:30:00+00:00 (config 2027-01-18T11:30:00+00:00)"
    )
    assert (
        capacity_reservation_check({"CapacityReservations": []}, cfg)[0].detail
        == "not found in this account and region"
    )


def test_reservation_must_hold_the_spare_nodes_too() -> None:
    """The launch template targets the reservation alone: a spare node beyond it could never launch."""
    cfg = load_config(env="prod")  # 8 training nodes and a spare
    described = load("describe-capacity-reservations.json")
    described["CapacityReservations"][0]["TotalInstanceCount"] = 8
    (result,) = capacity_reservation_check(described, cfg)
    assert result == Result(
        "reservation:cr-0123456789abcdef0", "FAIL", "8 instances < 9 (node_count 8 + spare_nodes 1)"
    )


def test_make_preflight_skips_cleanly_without_a_cluster(tmp_path: Path) -> None:
    """The real CLI with no kubeconfig and no AWS credentials: exit 0 and say why."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBECONFIG"))},
        "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    done = subprocess.run(
        [sys.executable, "-m", "scripts.preflight", "--env", "default"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "preflight: AWS checks skipped:" in out
    assert "preflight: cluster checks skipped:" in out
    assert out.rstrip().endswith("preflight: nothing to check here (no AWS credentials, no cluster); exiting 0")


def _table(subnets: list[str], route: dict, main: bool = False) -> dict:
    associations = [{"SubnetId": s} for s in subnets] + ([{"Main": True}] if main else [])
    return {
        "Associations": associations,
        "Routes": [{"DestinationCidrBlock": "10.0.0.0/16", "GatewayId": "local"}, route],
    }


def test_egress_through_a_nat_gateway_or_a_main_table_is_ok_and_missing_egress_is_named() -> None:
    """The shapes of ``aws ec2 describe-route-tables`` / ``describe-vpc-endpoints`` (written for this test)."""
    cfg = load_config(env="prod")
    a, b = list(cfg.network.private_subnets)
    nat = {"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": "nat-0123", "State": "active"}
    tables = {"RouteTables": [_table([a], nat), _table([], nat, main=True)]}
    results = pf.egress_check(tables, {"VpcEndpoints": []}, cfg)
    assert [(r.name, r.status, r.detail) for r in results] == [
        (f"egress:{a}", "ok", "default route via nat-0123"),
        (f"egress:{b}", "ok", "default route via nat-0123"),  # no association of its own: the main table
    ]
    igw = {"DestinationCidrBlock": "0.0.0.0/0", "GatewayId": "igw-0123", "State": "active"}
    dead = {**nat, "State": "blackhole"}
    endpoints = {"VpcEndpoints": [{"ServiceName": "com.amazonaws.us-west-2.sts", "State": "available"}]}
    results = pf.egress_check({"RouteTables": [_table([a], igw), _table([b], dead)]}, endpoints, cfg)
    assert [r.status for r in results] == ["FAIL", "FAIL"]
    assert "0.0.0.0/0 goes to an internet gateway" in results[0].detail
    assert "0.0.0.0/0 goes to nothing" in results[1].detail  # a blackholed NAT route is no route
    assert "https://nvidia.github.io/k8s-device-plugin" in results[0].detail
    assert results[0].detail.endswith("(interface endpoints missing as well: eks, ecr.api, ecr.dkr, logs)")


def test_the_pinned_ami_release_must_exist() -> None:
    cfg = load_config(env="prod")
    name = (
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/nvidia/"
        "amazon-eks-node-al2023-x86_64-nvidia-1.36-v20261115/image_id"
    )
    found = pf.ami_release_check({"Parameters": [{"Name": name, "Value": "ami-0abc"}]}, cfg)
    assert (found.status, found.detail) == ("ok", f"v20261115: ami-0abc ({name})")
    missing = pf.ami_release_check({"Parameters": [], "InvalidParameters": [name]}, cfg)
    assert missing.status == "FAIL" and "gpu_nodes.ami_release 'v20261115' is not a release" in missing.detail


def test_hugepages_short_node_is_named() -> None:
    nodes = load("nodes.json")
    nodes["items"][0]["status"]["allocatable"]["hugepages-2Mi"] = "0"
    results = gpu_nodes_check(nodes, load_config())
    assert results[1].status == "FAIL" and "hugepages-2Mi 0 < 5120Mi" in results[1].detail
