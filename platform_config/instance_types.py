"""The GPU instance-type table shared by the CDK node group and the cdk8s training charts.

Every per-instance number the stack needs (GPUs, EFA network cards, what a training pod may
request) lives here once. The CDK launch template computes its network interfaces from
``network_interfaces()``; the charts compute pod resources from the same row, so the two
cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Fraction of the EFA line rate that a healthy two-node all_reduce reaches at large messages (the preflight floor).
#: A conservative choice, to be replaced by the figure measured on the first healthy pair of nodes.
BUSBW_FLOOR_FRACTION = 0.6


@dataclass(frozen=True)
class NetworkInterfaceSpec:
    """One entry of a launch template's ``NetworkInterfaces`` list."""

    network_card_index: int
    device_index: int
    interface_type: str  # "interface" (ENA), "efa" (ENA + EFA) or "efa-only"


@dataclass(frozen=True)
class InstanceType:
    """Facts about one GPU instance type.

    ``pod_cpu`` / ``pod_memory_gib`` are what one training pod requests when it takes the whole
    node: the instance's vCPUs and memory minus headroom for the kubelet, system daemons and the
    device plugins.
    """

    name: str
    family: str
    gpu_model: str
    gpus: int
    gpu_memory_gib: int
    vcpus: int
    memory_gib: int
    efa_cards: int
    local_nvme: bool
    pod_cpu: int
    pod_memory_gib: int
    #: Network bandwidth of the instance's EFA cards together, Gbit/s (EC2 accelerated-computing specifications).
    efa_gbps: int = 3200
    hugepages_2mi_gib: int = 5  # what a training pod requests (hugepages-2Mi: 5120Mi)
    #: 2 MiB pages the node reserves before its kubelet starts (the user data sets ``vm.nr_hugepages``): the
    #: 5128 pages the EFA installer configures on an EFA instance (its hugepages setup; libfabric's efa provider
    #: allocates its internal buffer pools from this pool), which covers the pod's 5120Mi (2560 pages).
    hugepages_2mi_reserved: int = 5128
    gpudirect_rdma: bool = True  # FI_EFA_USE_DEVICE_RDMA=1

    def __post_init__(self) -> None:
        if self.hugepages_2mi_reserved * 2 < self.hugepages_2mi_gib * 1024:
            raise ValueError(
                f"{self.name}: {self.hugepages_2mi_reserved} reserved 2 MiB pages do not cover the pod's "
                f"{self.hugepages_2mi_gib} GiB of hugepages"
            )

    @property
    def expected_allreduce_busbw_gbs(self) -> float:
        """The all_reduce bus bandwidth (GB/s) that ``make preflight`` requires between two nodes over EFA.

        A floor derived from the hardware, not a measurement: nccl-tests' bus bandwidth is defined so that it
        approaches the bottleneck link's speed whatever the rank count (nccl-tests ``doc/PERFORMANCE.md``), and
        between two nodes that link is each node's EFA bandwidth, ``efa_gbps / 8`` GB/s. The floor is
        :data:`BUSBW_FLOOR_FRACTION` of it at the largest message size; a fabric that falls back to sockets or
        runs on a fraction of its cards lands far below it."""
        return round(self.efa_gbps / 8 * BUSBW_FLOOR_FRACTION, 1)

    def network_interfaces(self) -> list[NetworkInterfaceSpec]:
        """Launch-template interfaces, one per network card.

        Card 0 carries the primary interface (device index 0) as ``efa`` (ENA + EFA). Every other
        card carries one ``efa-only`` interface at device index 0, as the EC2 user guide
        ("Maximize network bandwidth ... with multiple network cards") and the EKS EFA guide
        prescribe: "use the next unused network card index, device index 0, for EFA-only".
        EFA-only interfaces take no IP address from the subnet; VPC CNI >= 1.18.5 ignores them.
        (terraform-aws-eks v21 uses device index 1 there, the slot the guide reserves for an
        optional extra ENA interface on that card.)"""
        cards = [NetworkInterfaceSpec(0, 0, "efa")]
        cards += [NetworkInterfaceSpec(i, 0, "efa-only") for i in range(1, self.efa_cards)]
        return cards

    @property
    def efa_device_count(self) -> int:
        """EFA devices the device plugin advertises as ``vpc.amazonaws.com/efa``."""
        return self.efa_cards


INSTANCE_TYPES: dict[str, InstanceType] = {
    t.name: t
    for t in (
        InstanceType(
            name="p5.48xlarge",
            family="p5",
            gpu_model="H100",
            gpus=8,
            gpu_memory_gib=80,
            vcpus=192,
            memory_gib=2048,
            efa_cards=32,
            local_nvme=True,
            pod_cpu=184,
            pod_memory_gib=1900,
        ),
        InstanceType(
            name="p5e.48xlarge",
            family="p5",
            gpu_model="H200",
            gpus=8,
            gpu_memory_gib=141,
            vcpus=192,
            memory_gib=2048,
            efa_cards=32,
            local_nvme=True,
            pod_cpu=184,
            pod_memory_gib=1900,
        ),
        InstanceType(
            name="p5en.48xlarge",
            family="p5",
            gpu_model="H200",
            gpus=8,
            gpu_memory_gib=141,
            vcpus=192,
            memory_gib=2048,
            efa_cards=16,
            local_nvme=True,
            pod_cpu=184,
            pod_memory_gib=1900,
        ),
        InstanceType(
            name="p4de.24xlarge",
            family="p4",
            gpu_model="A100-80GB",
            gpus=8,
            gpu_memory_gib=80,
            vcpus=96,
            memory_gib=1152,
            efa_cards=4,
            local_nvme=True,
            pod_cpu=90,
            pod_memory_gib=1050,
            efa_gbps=400,
        ),
    )
}


def instance_type(name: str) -> InstanceType:
    """The table row for ``name``; a clear error lists the supported types."""
    try:
        return INSTANCE_TYPES[name]
    except KeyError:
        raise ValueError(
            f"instance type {name!r} is not in the instance-type table; allowed: {', '.join(sorted(INSTANCE_TYPES))}"
        ) from None


#: GiB of memory per vCPU of the general-purpose (m), compute (c) and memory (r) families.
_SYSTEM_FAMILY_GIB_PER_VCPU = {"m": 4, "c": 2, "r": 8}
#: System-node families this project sizes pods for (x86_64, Nitro, current generations).
SYSTEM_FAMILIES = ("m5", "m6i", "m6a", "m7i", "m7a", "c5", "c6i", "c6a", "c7i", "c7a", "r5", "r6i", "r6a", "r7i", "r7a")
#: vCPUs per size.
_SYSTEM_SIZE_VCPUS = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32}


@dataclass(frozen=True)
class SystemInstanceType:
    """vCPUs and memory of a system-node instance type (CoreDNS, controllers, the dataset-preparation Job)."""

    name: str
    vcpus: int
    memory_gib: int


def system_instance_type(name: str) -> SystemInstanceType:
    """``m6i.xlarge`` -> 4 vCPUs, 16 GiB; a clear error lists the families and sizes this project knows."""
    family, _, size = name.partition(".")
    if family not in SYSTEM_FAMILIES or size not in _SYSTEM_SIZE_VCPUS:
        raise ValueError(
            f"instance type {name!r} is not a known system-node type; allowed: <family>.<size> with family in "
            f"{', '.join(SYSTEM_FAMILIES)} and size in {', '.join(_SYSTEM_SIZE_VCPUS)}"
        )
    vcpus = _SYSTEM_SIZE_VCPUS[size]
    return SystemInstanceType(name=name, vcpus=vcpus, memory_gib=vcpus * _SYSTEM_FAMILY_GIB_PER_VCPU[family[0]])
