"""Validation rules of the typed configuration: every bad value names its field."""

from __future__ import annotations

import pytest

from platform_config import MODE_LAYERS, ConfigError, ProjectConfig, RecoveryMode, config_from_dict, load_config
from platform_config.versions import DEFAULT_ADDON_VERSIONS, MANAGED_ADDONS, SUPPORTED_KUBERNETES_MINORS


def _error(data: dict) -> str:
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data)
    return str(exc.value)


def test_defaults_are_valid_and_documented_values() -> None:
    cfg = ProjectConfig()
    assert cfg.cluster.kubernetes_version == "1.36"
    assert cfg.gpu_nodes.instance_type == "p5.48xlarge"
    assert cfg.storage.fsx_capacity_gib == 1200
    assert cfg.instance.efa_cards == 32


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        ({"cluster": {"kubernetes_version": "1.31"}}, "cluster.kubernetes_version", "one of 1.32 .. 1.36"),
        ({"cluster": {"kubernetes_version": "1.99"}}, "cluster.kubernetes_version", "one of 1.32 .. 1.36"),
        ({"cluster": {"kubernetes_version": "latest"}}, "cluster.kubernetes_version", "1.NN"),
        ({"gpu_nodes": {"instance_type": "g5.48xlarge"}}, "gpu_nodes.instance_type", "p5.48xlarge"),
        ({"gpu_nodes": {"node_count": 0}}, "gpu_nodes.node_count", "greater than or equal to 1"),
        ({"gpu_nodes": {"node_count": 3, "max_nodes": 2}}, "gpu_nodes", "node_count + spare_nodes <= max_nodes"),
        ({"storage": {"fsx_capacity_gib": 3000}}, "storage.fsx_capacity_gib", "1200, 2400"),
        ({"storage": {"fsx_capacity_gib": 1000}}, "storage.fsx_capacity_gib", "1200, 2400"),
        ({"helm": {"nvidia_device_plugin": "0.19.2"}}, "helm.nvidia_device_plugin", "0.19.3"),
        ({"helm": {"efa_device_plugin": "0.5.9"}}, "helm.efa_device_plugin", "v0.5.10"),
        ({"helm": {"node_termination_handler": "latest"}}, "helm.node_termination_handler", "MAJOR.MINOR.PATCH"),
        (
            {"cluster": {"addon_versions": {"coredns": "1.11"}}},
            "cluster.addon_versions",
            "coredns version '1.11' must look like 'v1.2.3-eksbuild.1'",
        ),
        ({"cluster": {"addon_versions": {"metrics-server": "v1.0.0-eksbuild.1"}}}, "cluster.addon_versions", "unknown"),
        ({"cluster": {"admin_principal_arn": "alice"}}, "cluster.admin_principal_arn", "IAM role or user ARN"),
        (
            {"cluster": {"admin_principal_arn": "arn:aws:sts::111122223333:assumed-role/Admin/alice"}},
            "cluster.admin_principal_arn",
            "not the sts session ARN",
        ),
        ({"cluster": {"system_node_instance_type": "t3.micro"}}, "cluster.system_node_instance_type", "m6i"),
        ({"cluster": {"public_access_cidrs": ["10.0.0.0/33"]}}, "cluster", "not an IPv4 CIDR"),
        (
            {
                "image": {
                    "base_image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.9.0-gpu-py312-ec2"
                }
            },
            "image.base_image",
            "private ECR registry",
        ),
        ({"image": {"base_image": "nvcr.io/nvidia/cuda:latest"}}, "image.base_image", "pinned by digest"),
        ({"image": {"base_image": "nvcr.io/nvidia/cuda:13.0.2-base-ubuntu24.04"}}, "image.base_image", "digest"),
        ({"image": {"ubuntu_snapshot": "2026-11-15"}}, "image.ubuntu_snapshot", "pattern"),
        (
            {"gpu_nodes": {"capacity": {"type": "on-demand", "start": "2027-01-04T11:30:00Z"}}},
            "gpu_nodes.capacity",
            "only allowed with capacity-block",
        ),
        (
            {"gpu_nodes": {"capacity": {"scale_in_minutes_before_end": 30}}},
            "gpu_nodes.capacity.scale_in_minutes_before_end",
            "greater than or equal to 31",
        ),
        ({"dataset_prep": {"active_deadline_seconds": 10}}, "dataset_prep.active_deadline_seconds", "60"),
        ({"environment_kind": "staging"}, "environment_kind", "'demo' or 'deploy'"),
        ({"gpu_nodes": {"capacity": {"type": "capacity-block"}}}, "gpu_nodes.capacity", "reservation_id"),
        ({"inprocess": {"soft_timeout_s": 40, "hard_timeout_s": 30}}, "inprocess", "soft_timeout_s < hard_timeout_s"),
        ({"inprocess": {"gloo_timeout_s": 30}}, "inprocess", "gloo_timeout_s (30.0) must be below hard_timeout_s"),
        ({"job": {"inprocess_store_port": 29500}}, "job", "must differ from rendezvous_port"),
        ({"job": {"mode": "magic"}}, "job.mode", "sync-ckpt"),
        ({"faults": {"schedule": "explode@3"}}, "faults.schedule", "kind@step[:rank]"),
        ({"checkpoint": {"nvrx_staging": "gds"}}, "checkpoint.nvrx_staging", "'cpu-shm-cached'"),
        ({"checkpoint": {"write_threads": 0}}, "checkpoint.write_threads", "greater than or equal to 1"),
        ({"aws": {"region": "us-west-2", "availability_zone": "us-east-1a"}}, "aws", "not an AZ of region"),
        ({"aws": {"account": "12345"}}, "aws.account", "12-digit"),
        ({"cluster": {"endpoint_access": "public", "public_access_cidrs": []}}, "cluster", "public_access_cidrs"),
        ({"unknown_section": {}}, "unknown_section", "Extra inputs are not permitted"),
    ],
)
def test_bad_values_name_field_value_and_allowed(data: dict, field: str, fragment: str) -> None:
    message = _error(data)
    assert f"- {field}:" in message
    assert fragment in message


def test_existing_vpc_gpu_subnet_must_be_in_configured_az() -> None:
    message = _error(
        {
            "aws": {"region": "us-west-2", "availability_zone": "us-west-2b"},
            "network": {
                "vpc_id": "vpc-1",
                "private_subnets": {"subnet-a": "us-west-2a", "subnet-b": "us-west-2b"},
                "gpu_subnet_id": "subnet-a",
            },
        }
    )
    assert "gpu_subnet_id 'subnet-a' is in AZ 'us-west-2a'" in message


def test_existing_vpc_requires_gpu_subnet_among_private_subnets() -> None:
    message = _error({"network": {"vpc_id": "vpc-1", "private_subnets": {"subnet-a": "us-east-1a"}}})
    assert "gpu_subnet_id None must be one of private_subnets" in message


def test_every_recovery_mode_has_layers() -> None:
    assert set(MODE_LAYERS) == set(RecoveryMode)
    assert not MODE_LAYERS[RecoveryMode.K8S_ONLY].inprocess
    assert not MODE_LAYERS[RecoveryMode.K8S_ONLY].ft_launcher
    assert MODE_LAYERS[RecoveryMode.SYNC_CKPT].checkpoint_mode == "sync"
    both = MODE_LAYERS[RecoveryMode.INPROCESS_FT]
    assert both.inprocess and both.ft_launcher and both.checkpoint_mode == "async"


def test_config_is_immutable() -> None:
    cfg = ProjectConfig()
    with pytest.raises(Exception, match="frozen"):
        cfg.cluster.name = "other"  # type: ignore[misc]


BLOCK = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
ADMIN = "arn:aws:iam::111122223333:role/Admin"


def test_capacity_block_needs_its_window() -> None:
    assert "needs start and end" in _error({"gpu_nodes": {"capacity": BLOCK}})
    message = _error(
        {"gpu_nodes": {"capacity": {**BLOCK, "start": "2027-01-04T11:30:00", "end": "2027-01-05T11:30:00Z"}}}
    )
    assert "gpu_nodes.capacity.start: Input should have timezone info" in message
    short = {**BLOCK, "start": "2027-01-04T11:30:00Z", "end": "2027-01-04T12:00:00Z"}
    assert "minus scale_in_minutes_before_end (60) must be after start 2027-01-04T11:30:00+00:00" in _error(
        {"gpu_nodes": {"capacity": short}}
    )


def test_capacity_block_group_starts_empty() -> None:
    window = {**BLOCK, "start": "2027-01-04T11:30:00Z", "end": "2027-01-18T11:30:00Z"}
    message = _error({"gpu_nodes": {"min_nodes": 1, "capacity": window}})
    assert "- gpu_nodes: min_nodes must be 0 with a Capacity Block (got 1)" in message


def test_capacity_block_scale_in_time_and_placement_group() -> None:
    cap = config_from_dict(
        {"gpu_nodes": {"capacity": {**BLOCK, "start": "2027-01-04T11:30:00Z", "end": "2027-01-18T11:30:00Z"}}}
    ).gpu_nodes.capacity
    assert cap.scale_in_at is not None and cap.scale_in_at.isoformat() == "2027-01-18T10:30:00+00:00"
    assert cap.placement_group is False
    assert ProjectConfig().gpu_nodes.capacity.placement_group is True
    odcr = {"type": "capacity-reservation", "reservation_id": "cr-0123456789abcdef0"}
    assert config_from_dict({"gpu_nodes": {"capacity": odcr}}).gpu_nodes.capacity.placement_group is False


def test_demo_is_the_default_kind_and_keeps_the_placeholder_access() -> None:
    cfg = ProjectConfig()
    assert cfg.environment_kind == "demo"
    assert cfg.cluster.public_access_cidrs == ["203.0.113.0/24"] and cfg.cluster.admin_principal_arn is None


def test_deploy_requires_an_admin_principal() -> None:
    message = _error({"environment_kind": "deploy", "cluster": {"public_access_cidrs": ["198.18.0.0/24"]}})
    assert "  - cluster.admin_principal_arn is required with environment_kind 'deploy' (got null)" in message


@pytest.mark.parametrize("cidr", ["203.0.113.0/24", "203.0.113.7/32", "192.0.2.0/24", "198.51.100.0/25"])
def test_deploy_refuses_documentation_cidrs(cidr: str) -> None:
    message = _error(
        {"environment_kind": "deploy", "cluster": {"admin_principal_arn": ADMIN, "public_access_cidrs": [cidr]}}
    )
    assert f"cluster.public_access_cidrs entry '{cidr}' is a documentation range (RFC 5737" in message


#: What a deploy environment needs besides access (a pinned GPU AMI, alarms that reach someone).
DEPLOY_OPERATIONS = {
    "gpu_nodes": {"ami_release": "v20261115"},
    "observability": {"emf_metrics": True, "alarm_email": "oncall@example.com"},
}


def test_deploy_with_real_access_settings_is_valid() -> None:
    public = config_from_dict(
        {
            "environment_kind": "deploy",
            "cluster": {"admin_principal_arn": ADMIN, "public_access_cidrs": ["198.18.0.0/24"]},
            **DEPLOY_OPERATIONS,
        }
    )
    assert public.cluster.admin_principal_arn == ADMIN
    # a range that merely contains a documentation block is a real (if wide) choice, not a placeholder
    wide = {
        "environment_kind": "deploy",
        "cluster": {"admin_principal_arn": ADMIN, "public_access_cidrs": ["0.0.0.0/0"]},
        **DEPLOY_OPERATIONS,
    }
    assert config_from_dict(wide).cluster.public_access_cidrs == ["0.0.0.0/0"]
    # a private endpoint never uses the CIDRs, so the inherited placeholder does not matter there
    private = config_from_dict(
        {
            "environment_kind": "deploy",
            "cluster": {"admin_principal_arn": ADMIN, "endpoint_access": "private"},
            **DEPLOY_OPERATIONS,
        }
    )
    assert private.cluster.public_access_cidrs == ["203.0.113.0/24"]


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_MINORS)
def test_every_supported_version_pins_every_addon_for_its_minor(minor: int) -> None:
    cfg = config_from_dict({"cluster": {"kubernetes_version": f"1.{minor}"}})
    assert cfg.cluster.addon_versions == DEFAULT_ADDON_VERSIONS[minor]
    assert set(cfg.cluster.addon_versions) == set(MANAGED_ADDONS)
    assert cfg.cluster.addon_versions["kube-proxy"].startswith(f"v1.{minor}.")


def test_single_addon_override_keeps_the_other_pins() -> None:
    cfg = config_from_dict({"cluster": {"addon_versions": {"coredns": "v1.14.9-eksbuild.1"}}})
    assert cfg.cluster.addon_versions == {**DEFAULT_ADDON_VERSIONS[36], "coredns": "v1.14.9-eksbuild.1"}


def test_kube_proxy_must_match_the_cluster_minor() -> None:
    message = _error(
        {"cluster": {"kubernetes_version": "1.33", "addon_versions": {"kube-proxy": "v1.36.0-eksbuild.21"}}}
    )
    assert "kube-proxy 'v1.36.0-eksbuild.21' is for Kubernetes 1.36, not kubernetes_version '1.33'" in message


def test_an_unsupported_version_is_the_only_error() -> None:
    message = _error({"cluster": {"kubernetes_version": "1.29"}})
    assert message.count("\n  - ") == 1 and "cluster.kubernetes_version" in message


def test_dataset_prep_must_fit_half_a_system_node() -> None:
    message = _error({"dataset_prep": {"cpu": 2, "memory_gib": 9}})
    assert "more than half of a m6i.xlarge system node (4 vCPUs, 16 GiB): allowed up to 2 CPU / 8 GiB" in message
    big = config_from_dict(
        {"cluster": {"system_node_instance_type": "m6i.2xlarge"}, "dataset_prep": {"cpu": 4, "memory_gib": 16}}
    )
    assert big.dataset_prep.cpu == 4


def test_helm_charts_are_pinned() -> None:
    helm = ProjectConfig().helm
    assert (helm.nvidia_device_plugin, helm.efa_device_plugin, helm.node_termination_handler) == (
        "0.19.3",
        "v0.5.30",
        "0.27.6",
    )


def test_image_pins_what_the_gpu_runs_proved() -> None:
    image = ProjectConfig().image
    assert (image.torch_version, image.cuda_version, image.nccl_version, image.python_version) == (
        "2.11.0",
        "13.0",
        "2.28.9",
        "3.12",
    )
    assert image.base_image.startswith("nvcr.io/nvidia/cuda:13.0.2-base-ubuntu24.04@sha256:")
    digest = "nvcr.io/nvidia/cuda@sha256:" + "0" * 64
    assert config_from_dict({"image": {"base_image": digest}}).image.base_image == digest


def test_local_cuda_timeouts_scale_the_checkpoint_group_s_gloo_deadline_too() -> None:
    """On CUDA the local timeouts are 2.5 x the CPU ones (soft 4 -> 10 s, hard 8 -> 20 s), the checkpoint group's gloo
    deadline included (3 -> 7.5 s): 2 x H200 ran one rank's first save 2.3 s behind its peer's, which waited in that
    group's collective and timed out at the unscaled 3 s (2 x H200, 2026-12-04)."""
    local = ProjectConfig().local
    ip, _ = local.timeouts(cuda=True)
    assert (ip.soft_timeout_s, ip.hard_timeout_s, ip.gloo_timeout_s) == (10.0, 20.0, 7.5)
    assert ip.gloo_timeout_s < ip.hard_timeout_s  # NVRx cannot abort gloo: its deadline stays below the hard timeout
    assert local.timeouts(cuda=False)[0].gloo_timeout_s == 3.0


def test_the_training_nodes_and_spares_must_fit_in_the_reservation():
    block = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0", "start": "2027-01-04T11:30:00Z"}
    block |= {"end": "2027-01-18T11:30:00Z", "reserved_instances": 9}
    nodes = {"node_count": 8, "spare_nodes": 1, "max_nodes": 9, "capacity": block}
    assert config_from_dict({"gpu_nodes": nodes}).gpu_nodes.group_size == 9
    with pytest.raises(
        ConfigError, match=r"node_count \+ spare_nodes = 8 \+ 2 = 10 exceeds capacity.reserved_instances = 9"
    ):
        config_from_dict({"gpu_nodes": {**nodes, "spare_nodes": 2, "max_nodes": 10}})
    with pytest.raises(ConfigError, match="reserved_instances is only allowed with capacity-reservation or capacity"):
        config_from_dict({"gpu_nodes": {"capacity": {"reserved_instances": 2}}})


def test_prod_keeps_a_hot_spare_within_its_capacity_block():
    prod = load_config(None, "prod").gpu_nodes
    assert (prod.node_count, prod.spare_nodes, prod.capacity.reserved_instances) == (8, 1, 9)


#: soft / hard / barrier (s) of the in-process layer, and gloo's deadline below the hard timeout.
ORDERED = {"soft_timeout_s": 20.0, "hard_timeout_s": 30.0, "barrier_timeout_s": 60.0, "gloo_timeout_s": 10.0}


@pytest.mark.parametrize(
    "override",
    [
        {"soft_timeout_s": 30.0},  # soft == hard
        {"soft_timeout_s": 45.0},  # soft > hard
        {"barrier_timeout_s": 30.0},  # hard == barrier
        {"hard_timeout_s": 70.0},  # hard > barrier
        {"soft_timeout_s": 70.0, "hard_timeout_s": 65.0},  # both above the barrier
    ],
)
def test_the_in_process_timeouts_must_be_ordered_soft_hard_barrier(override: dict) -> None:
    """Issue 48, item 8: NVRx needs soft < hard < barrier; every other order (an equality too) is refused, in the
    deployed section and in the local one alike."""
    assert config_from_dict({"inprocess": ORDERED}).inprocess.barrier_timeout_s == 60.0
    values = {**ORDERED, **override}
    want = (
        f"soft_timeout_s < hard_timeout_s < barrier_timeout_s, got {values['soft_timeout_s']} / "
        f"{values['hard_timeout_s']} / {values['barrier_timeout_s']}"
    )
    assert want in _error({"inprocess": values})
    assert want in _error({"local": {"inprocess": values}})
