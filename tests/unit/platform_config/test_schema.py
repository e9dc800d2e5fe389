"""Validation rules of the typed configuration: every bad value names its field."""

from __future__ import annotations

import pytest

from platform_config import MODE_LAYERS, ConfigError, ProjectConfig, RecoveryMode, config_from_dict


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
        ({"cluster": {"kubernetes_version": "1.27"}}, "cluster.kubernetes_version", "1.28 or newer"),
        ({"cluster": {"kubernetes_version": "1.99"}}, "cluster.kubernetes_version", "supports up to"),
        ({"cluster": {"kubernetes_version": "latest"}}, "cluster.kubernetes_version", "1.NN"),
        ({"gpu_nodes": {"instance_type": "g5.48xlarge"}}, "gpu_nodes.instance_type", "p5.48xlarge"),
        ({"gpu_nodes": {"node_count": 0}}, "gpu_nodes.node_count", "greater than or equal to 1"),
        ({"gpu_nodes": {"node_count": 3, "max_nodes": 2}}, "gpu_nodes", "min_nodes <= node_count <= max_nodes"),
        ({"storage": {"fsx_capacity_gib": 3000}}, "storage.fsx_capacity_gib", "1200, 2400"),
        ({"storage": {"fsx_capacity_gib": 1000}}, "storage.fsx_capacity_gib", "1200, 2400"),
        ({"helm": {"nvidia_device_plugin": "0.19.2"}}, "helm.nvidia_device_plugin", "0.19.3"),
        ({"helm": {"efa_device_plugin": "0.5.9"}}, "helm.efa_device_plugin", "0.5.10"),
        ({"gpu_nodes": {"capacity": {"type": "capacity-block"}}}, "gpu_nodes.capacity", "reservation_id"),
        ({"inprocess": {"soft_timeout_s": 40, "hard_timeout_s": 30}}, "inprocess", "soft_timeout_s < hard_timeout_s"),
        ({"inprocess": {"gloo_timeout_s": 30}}, "inprocess", "gloo_timeout_s (30.0) must be below hard_timeout_s"),
        ({"job": {"inprocess_store_port": 29500}}, "job", "must differ from rendezvous_port"),
        ({"job": {"mode": "magic"}}, "job.mode", "sync-ckpt"),
        ({"faults": {"schedule": "explode@3"}}, "faults.schedule", "kind@step[:rank]"),
        ({"checkpoint": {"nvrx_staging": "gds"}}, "checkpoint.nvrx_staging", "'cpu-shm-cached'"),
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
