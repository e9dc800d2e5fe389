"""NVIDIA and EFA device plugin Helm charts: pinned versions, placement on GPU/EFA nodes, GPU toleration."""

from __future__ import annotations

import json

from stacks.device_plugins import EFA_CHART, EFA_REPOSITORY, NVIDIA_CHART, NVIDIA_REPOSITORY
from stacks.gpu_user_data import EFA_PRESENT_LABEL, gpu_node_labels
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import resources

TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def charts(env: Synthesized) -> dict[str, dict]:
    tpl = env.template_json(env.platform.cluster)
    return {v["Properties"]["Chart"]: v["Properties"] for v in resources(tpl, "Custom::AWSCDK-EKS-HelmChart").values()}


def values(chart: dict) -> dict:
    raw = chart["Values"]
    if isinstance(raw, dict):  # Fn::Join of a JSON string with tokens
        raw = "".join(p if isinstance(p, str) else "<token>" for p in raw["Fn::Join"][1])
    return json.loads(raw)


def test_chart_versions_come_from_config(any_env: Synthesized) -> None:
    c = charts(any_env)
    assert c[NVIDIA_CHART]["Version"] == any_env.cfg.helm.nvidia_device_plugin
    assert c[NVIDIA_CHART]["Repository"] == NVIDIA_REPOSITORY
    assert c[EFA_CHART]["Version"] == any_env.cfg.helm.efa_device_plugin
    assert c[EFA_CHART]["Repository"] == EFA_REPOSITORY
    assert {c[NVIDIA_CHART]["Namespace"], c[EFA_CHART]["Namespace"]} == {"kube-system"}


def test_nvidia_plugin_on_gpu_nodes_mofed_off(default_env: Synthesized) -> None:
    v = values(charts(default_env)[NVIDIA_CHART])
    assert v["mofedEnabled"] is False
    assert v["tolerations"] == [TOLERATION]
    (term,) = v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {e["key"]: e["values"] for e in term["matchExpressions"]} == {
        k: [val] for k, val in gpu_node_labels(default_env.cfg).items()
    }


def test_efa_plugin_on_efa_nodes_tolerates_gpu_taint(default_env: Synthesized) -> None:
    v = values(charts(default_env)[EFA_CHART])
    assert v["nodeSelector"] == {EFA_PRESENT_LABEL: "true"}
    assert gpu_node_labels(default_env.cfg)[EFA_PRESENT_LABEL] == "true"  # the nodes really carry it
    assert v["tolerations"] == [TOLERATION]
    assert v["supportedInstanceLabels"]["values"] == [default_env.cfg.gpu_nodes.instance_type]


def test_charts_wait_for_the_system_nodes(default_env: Synthesized) -> None:
    tpl = default_env.template_json(default_env.platform.cluster)
    (ng_id,) = resources(tpl, "AWS::EKS::Nodegroup")
    for chart in resources(tpl, "Custom::AWSCDK-EKS-HelmChart").values():
        assert ng_id in chart["DependsOn"]
