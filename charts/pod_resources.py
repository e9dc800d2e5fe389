"""Container resources of a training pod, from the instance-type table the CDK node group also uses."""

from __future__ import annotations

from cdk8s_plus_36 import k8s

from platform_config import InstanceType

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE = "hugepages-2Mi"


def resource_quantities(instance: InstanceType) -> dict[str, str]:
    """One pod per node: all GPUs and EFA devices, the EFA hugepages, and the node's cpu/memory minus headroom."""
    return {
        "cpu": str(instance.pod_cpu),
        "memory": f"{instance.pod_memory_gib}Gi",
        GPU_RESOURCE: str(instance.gpus),
        EFA_RESOURCE: str(instance.efa_device_count),
        HUGEPAGES_RESOURCE: f"{instance.hugepages_2mi_gib * 1024}Mi",
    }


def pod_resources(instance: InstanceType) -> k8s.ResourceRequirements:
    """requests = limits (Guaranteed QoS; extended resources and hugepages require it anyway)."""
    quantities = {k: k8s.Quantity.from_string(v) for k, v in resource_quantities(instance).items()}
    return k8s.ResourceRequirements(requests=dict(quantities), limits=dict(quantities))
