import pytest
from cdk8s_plus_36 import k8s

from charts.pod_resources import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_RESOURCE, pod_resources, resource_quantities
from platform_config import INSTANCE_TYPES
from tests.unit.charts.conftest import bare_chart


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_quantities_come_from_the_instance_table(name):
    it = INSTANCE_TYPES[name]
    q = resource_quantities(it)
    assert q[GPU_RESOURCE] == str(it.gpus)
    assert q[EFA_RESOURCE] == str(it.efa_device_count)
    assert q[HUGEPAGES_RESOURCE] == f"{it.hugepages_2mi_gib * 1024}Mi"
    assert q["cpu"] == str(it.pod_cpu) and q["memory"] == f"{it.pod_memory_gib}Gi"
    assert it.pod_cpu < it.vcpus and it.pod_memory_gib < it.memory_gib


def test_requests_equal_limits_and_render_as_strings():
    it = INSTANCE_TYPES["p5.48xlarge"]
    chart = bare_chart()
    k8s.KubePod(chart, "p", spec=k8s.PodSpec(containers=[k8s.Container(name="c", resources=pod_resources(it))]))
    (pod,) = chart.to_json()
    res = pod["spec"]["containers"][0]["resources"]
    assert res["requests"] == res["limits"] == resource_quantities(it)
