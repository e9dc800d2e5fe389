"""Reading the synthesized manifests: the real charts' Job, and refusals of what the local cluster cannot run."""

from __future__ import annotations

import copy

import pytest
import yaml

from charts.main import build_app
from charts.names import config_map_name, job_name, service_name
from platform_config import RecoveryMode
from tests.unit.charts.conftest import make_cfg
from training.cluster.manifest import ManifestError, Manifests, parse_budget, parse_job, quantity_bytes


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    cfg = make_cfg()
    out = tmp_path_factory.mktemp("dist")
    build_app(cfg, str(out), environ={}).synth()
    return cfg, out


def test_the_charts_job_is_read_field_by_field(synthesized):
    cfg, out = synthesized
    m = Manifests.load(out)
    mode = RecoveryMode.INPROCESS_FT
    job = m.jobs[job_name(cfg, mode)]
    assert (job.completions, job.parallelism) == (2, 2)
    assert (job.backoff_limit_per_index, job.max_failed_indexes, job.backoff_limit) == (3, 0, 6)
    assert job.pod_replacement_policy == "Failed"
    assert [r.action for r in job.rules] == ["FailJob", "Ignore"]
    assert job.rules[0].values == (2, 20, 22, 42) and job.rules[1].conditions == (("DisruptionTarget", "True"),)
    assert job.container.name == "trainer" and job.container.argv[:2] == ["bash", "-c"]
    assert job.container.gpus == 8  # a p5.48xlarge's GPUs, the limit the device plugin honours
    assert job.subdomain == service_name(cfg) in m.headless_services
    assert {v.kind for v in job.volumes.values()} == {"configMap", "persistentVolumeClaim", "emptyDir"}
    assert job.volumes["dshm"].medium == "Memory" and job.volumes["dshm"].size_limit == "64Gi"
    env = {e.name: e for e in job.container.env}
    assert env["JOB_INDEX_FAILURES"].field_path == "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"].value == "2"
    assert job.termination_grace_s == int(cfg.ft.section_timeouts_s["checkpoint"])
    assert config_map_name(cfg) in m.config_maps and "config.json" in m.config_maps[config_map_name(cfg)]
    assert len([j for j in m.jobs.values() if j.indexed]) == len(RecoveryMode)
    prep = m.jobs["fsdp-train-prepare-data"]  # the dataset Job: one completion, not Indexed
    assert (prep.indexed, prep.completions, prep.backoff_limit, prep.active_deadline_s) == (False, 1, 2, 7200)
    assert prep.container.argv[:3] == ["python", "-m", "training.data.prepare"]
    assert prep.container.gpus == 0
    assert job.node_failure_toleration_s == cfg.job.node_failure_toleration_s == 60  # the chart's tolerations
    assert prep.node_failure_toleration_s == 300  # none in its spec: Kubernetes' DefaultTolerationSeconds
    budget = m.budgets[job_name(cfg, mode)]
    assert (budget.max_unavailable, budget.match_labels.items() <= job.labels.items()) == (1, True)
    assert (budget.allows(0), budget.allows(1)) == (True, False)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["spec"].__setitem__("completionMode", "NonIndexed"), "Indexed Jobs, or Jobs of one completion"),
        (lambda d: d["spec"]["template"]["spec"].__setitem__("restartPolicy", "OnFailure"), "must be Never"),
        (
            lambda d: d["spec"]["template"]["spec"]["containers"][0]["env"].append(
                {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
            ),
            "only value and valueFrom.fieldRef",
        ),
        (
            lambda d: d["spec"]["template"]["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
            "only configMap, persistentVolumeClaim and emptyDir",
        ),
        (
            lambda d: d["spec"].__setitem__("successPolicy", {"rules": [{"succeededCount": 1}]}),
            "Job spec.successPolicy: the local Job controller does not implement it",
        ),
    ],
)
def test_what_the_local_cluster_cannot_honour_is_refused(synthesized, change, message):
    _, out = synthesized
    doc = next(yaml.safe_load_all((out / "train-k8s-only.k8s.yaml").read_text()))
    doc = copy.deepcopy(doc)
    change(doc)
    with pytest.raises(ManifestError, match=message):
        parse_job(doc)


@pytest.mark.parametrize(("q", "n"), [("64Gi", 64 << 30), ("512Mi", 512 << 20), ("7", 7), ("1Ki", 1024)])
def test_quantities(q, n):
    assert quantity_bytes(q) == n


def test_a_budget_other_than_an_integer_max_unavailable_is_refused():
    doc = {"metadata": {"name": "b"}, "spec": {"minAvailable": 1}}
    with pytest.raises(ManifestError, match="PodDisruptionBudget b: the local cluster reads an integer maxUnavailable"):
        parse_budget(doc)
    assert parse_budget({"metadata": {"name": "b"}, "spec": {"maxUnavailable": 2}}).max_unavailable == 2


def test_decimal_quantities_are_refused():
    with pytest.raises(ManifestError, match="Ki/Mi/Gi/Ti"):
        quantity_bytes("1G")
