"""The training pods land on the CDK GPU node group: the chart's selector/tolerations vs the node group's own."""

import pytest

from charts.node_placement import INSTANCE_TYPE_LABEL, node_selector, parse_taint, tolerations
from platform_config import RecoveryMode
from stacks.gpu_user_data import gpu_node_labels, gpu_node_taints
from tests.unit.charts.conftest import make_cfg, synth_job

CONFIGS = {
    "default": {},
    "custom-labels": {"gpu_nodes": {"node_labels": {"team": "ml", "pool": "h100"}, "instance_type": "p5en.48xlarge"}},
    "p4de": {"gpu_nodes": {"instance_type": "p4de.24xlarge"}},
}


def _tolerates(tol: dict, key: str, value: str | None, effect: str) -> bool:
    """Kubernetes toleration matching (``Exists`` ignores the value; an empty effect matches all)."""
    if tol.get("effect") and tol["effect"] != effect:
        return False
    if tol.get("key") not in (None, key):
        return False
    if tol.get("operator", "Equal") == "Exists":
        return True
    return tol.get("value", "") == (value or "")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_node_selector_only_uses_labels_the_node_group_sets(name):
    cfg = make_cfg(**CONFIGS[name])
    selector = synth_job(cfg, RecoveryMode.INPROCESS_FT)["spec"]["template"]["spec"]["nodeSelector"]
    node_labels = {**gpu_node_labels(cfg), INSTANCE_TYPE_LABEL: cfg.gpu_nodes.instance_type}
    assert selector.items() <= node_labels.items()
    assert selector[INSTANCE_TYPE_LABEL] == cfg.gpu_nodes.instance_type
    assert cfg.gpu_nodes.node_labels.items() <= selector.items()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_tolerations_cover_every_gpu_node_taint(name):
    cfg = make_cfg(**CONFIGS[name])
    tols = synth_job(cfg, RecoveryMode.K8S_ONLY)["spec"]["template"]["spec"]["tolerations"]
    taints = gpu_node_taints(cfg)
    assert taints
    for taint in taints:
        key, value, effect = parse_taint(taint)
        assert any(_tolerates(t, key, value, effect) for t in tols), f"no toleration for {taint}"


def test_a_different_taint_is_not_tolerated(cfg):
    tols = synth_job(cfg, RecoveryMode.K8S_ONLY)["spec"]["template"]["spec"]["tolerations"]
    assert not any(_tolerates(t, "nvidia.com/gpu", "false", "NoSchedule") for t in tols)
    assert not any(_tolerates(t, "other", "true", "NoExecute") for t in tols)


@pytest.mark.parametrize(
    ("taint", "parsed"),
    [
        ("nvidia.com/gpu=true:NoSchedule", ("nvidia.com/gpu", "true", "NoSchedule")),
        ("dedicated:NoExecute", ("dedicated", None, "NoExecute")),
    ],
)
def test_parse_taint(taint, parsed):
    assert parse_taint(taint) == parsed


def test_value_less_taint_gets_exists_toleration():
    cfg = make_cfg(gpu_nodes={"node_taints": ["dedicated:NoExecute"]})
    tol = tolerations(cfg)[-1]
    assert (tol.key, tol.operator, tol.effect, tol.value) == ("dedicated", "Exists", "NoExecute", None)


def test_pods_leave_a_failed_node_after_the_configured_seconds():
    """Kubernetes would keep a pod bound to an unreachable node for 300 s; the Job's pods tolerate the node-failure
    taints for job.node_failure_toleration_s only, then the index is replaced."""
    cfg = make_cfg(job={"node_failure_toleration_s": 45})
    tols = synth_job(cfg, RecoveryMode.INPROCESS_FT)["spec"]["template"]["spec"]["tolerations"]
    failure = {t["key"]: t for t in tols if t["key"].startswith("node.kubernetes.io/")}
    assert set(failure) == {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    for tol in failure.values():
        assert (tol["operator"], tol["effect"], tol["tolerationSeconds"]) == ("Exists", "NoExecute", 45)


def test_selector_adds_instance_type(cfg):
    assert node_selector(cfg, cfg.instance) == {**cfg.gpu_nodes.node_labels, INSTANCE_TYPE_LABEL: cfg.instance.name}
