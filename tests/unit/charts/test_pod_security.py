"""Least privilege: the container and pod security settings, and that both Jobs carry them."""

from __future__ import annotations

import kubernetes_validate
import pytest
from cdk8s_plus_36 import k8s

from charts.dataset_job import DatasetJob
from charts.pod_security import (
    AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
    BASELINE_CAPABILITIES,
    container_security_context,
    dataset_security_context,
    pod_security_context,
    training_security_context,
)
from platform_config import RecoveryMode
from tests.unit.charts.conftest import IMAGE, bare_chart, synth_job, trainer

TRAINING = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def as_json(context: k8s.SecurityContext) -> dict:
    """The context as it lands in a manifest (through a real cdk8s synth of a pod)."""
    chart = bare_chart()
    k8s.KubePod(
        chart, "p", spec=k8s.PodSpec(containers=[k8s.Container(name="c", image=IMAGE, security_context=context)])
    )
    (pod,) = chart.to_json()
    return pod["spec"]["containers"][0]["securityContext"]


def test_training_adds_no_capability() -> None:
    assert as_json(training_security_context()) == TRAINING


def test_baseline_capability_list_is_the_pod_security_standards_one() -> None:
    """Pod Security Standards, baseline, "Capabilities": the thirteen a container may add; IPC_LOCK is not one."""
    assert len(BASELINE_CAPABILITIES) == 13 and "IPC_LOCK" not in BASELINE_CAPABILITIES


def test_dataset_keeps_no_capability() -> None:
    assert as_json(dataset_security_context()) == {**TRAINING, "capabilities": {"drop": ["ALL"]}}


def test_added_capabilities_are_exactly_the_ones_asked_for() -> None:
    assert as_json(container_security_context(["NET_BIND_SERVICE"]))["capabilities"] == {
        "add": ["NET_BIND_SERVICE"],
        "drop": ["ALL"],
    }


@pytest.mark.parametrize("mode", list(RecoveryMode))
def test_every_training_job_is_least_privilege(cfg, mode: RecoveryMode) -> None:
    job = synth_job(cfg, mode)
    assert trainer(job)["securityContext"] == TRAINING
    pod_spec = job["spec"]["template"]["spec"]
    for c in pod_spec.get("initContainers", []) + pod_spec["containers"]:
        assert set(c.get("securityContext", {}).get("capabilities", {}).get("add", [])) <= BASELINE_CAPABILITIES
        assert not c.get("securityContext", {}).get("privileged", False)
    assert not any(pod_spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert not any("hostPath" in v for v in pod_spec.get("volumes", []))
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is AUTOMOUNT_SERVICE_ACCOUNT_TOKEN is False
    assert pod["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"}
    }  # for every container, as the dataset's
    kubernetes_validate.validate(job, f"{cfg.cluster.kubernetes_version}.0", strict=True)


def test_dataset_job_is_least_privilege(cfg) -> None:
    chart = bare_chart()
    DatasetJob(chart, "d", cfg, image=IMAGE)
    (job,) = chart.to_json()
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["securityContext"] == {**TRAINING, "capabilities": {"drop": ["ALL"]}}
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}


def test_pod_level_seccomp() -> None:
    chart = bare_chart()
    k8s.KubePod(
        chart,
        "p",
        spec=k8s.PodSpec(containers=[k8s.Container(name="c", image=IMAGE)], security_context=pod_security_context()),
    )
    (pod,) = chart.to_json()
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
