"""The instance-type table that both the CDK node group and the charts read."""

from __future__ import annotations

from dataclasses import replace

import pytest

from platform_config import INSTANCE_TYPES, instance_type
from platform_config.instance_types import system_instance_type


def test_p5_has_32_cards_efa_on_card0_efa_only_elsewhere() -> None:
    nics = instance_type("p5.48xlarge").network_interfaces()
    assert [n.network_card_index for n in nics] == list(range(32))
    assert nics[0].interface_type == "efa" and nics[0].device_index == 0
    assert all(n.interface_type == "efa-only" and n.device_index == 0 for n in nics[1:])


@pytest.mark.parametrize(("name", "cards"), [("p5e.48xlarge", 32), ("p5en.48xlarge", 16), ("p4de.24xlarge", 4)])
def test_card_counts(name: str, cards: int) -> None:
    assert len(instance_type(name).network_interfaces()) == cards


def test_pod_requests_fit_inside_the_instance() -> None:
    for spec in INSTANCE_TYPES.values():
        assert 0 < spec.pod_cpu < spec.vcpus
        assert 0 < spec.pod_memory_gib < spec.memory_gib


def test_unknown_type_lists_allowed() -> None:
    with pytest.raises(ValueError, match=r"allowed: p4de\.24xlarge, p5\.48xlarge"):
        instance_type("g6.xlarge")


@pytest.mark.parametrize(
    ("name", "vcpus", "memory_gib"),
    [("m6i.xlarge", 4, 16), ("c6i.2xlarge", 8, 16), ("r7i.large", 2, 16), ("m5.8xlarge", 32, 128)],
)
def test_system_instance_sizes(name: str, vcpus: int, memory_gib: int) -> None:
    spec = system_instance_type(name)
    assert (spec.vcpus, spec.memory_gib) == (vcpus, memory_gib)


@pytest.mark.parametrize("name", ["t3.micro", "m6i.metal", "p5.48xlarge", "m6i"])
def test_unknown_system_type_lists_families_and_sizes(name: str) -> None:
    with pytest.raises(ValueError, match=r"not a known system-node type; allowed: <family>\.<size> with family in m5"):
        system_instance_type(name)


def test_reserved_hugepages_cover_the_pod_request_and_the_table_refuses_less() -> None:
    """The node reserves 5128 x 2 MiB (the EFA installer's count) for a pod asking 5120Mi; a row whose reservation
    cannot hold its pod's request does not load."""
    p5 = INSTANCE_TYPES["p5.48xlarge"]
    assert (p5.hugepages_2mi_reserved, p5.hugepages_2mi_gib) == (5128, 5)
    with pytest.raises(ValueError, match="2559 reserved 2 MiB pages do not cover the pod's 5 GiB"):
        replace(p5, hugepages_2mi_reserved=2559)


def test_bus_bandwidth_floor_follows_the_efa_line_rate() -> None:
    floors = {name: (t.efa_gbps, t.expected_allreduce_busbw_gbs) for name, t in INSTANCE_TYPES.items()}
    assert floors == {
        "p5.48xlarge": (3200, 240.0),
        "p5e.48xlarge": (3200, 240.0),
        "p5en.48xlarge": (3200, 240.0),
        "p4de.24xlarge": (400, 30.0),
    }
