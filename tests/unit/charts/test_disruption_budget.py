"""The training Job's PodDisruptionBudget: one voluntary eviction at a time (a drain of one node)."""

from __future__ import annotations

from charts.disruption_budget import TrainingDisruptionBudget
from charts.names import job_name
from platform_config import RecoveryMode
from tests.unit.charts.conftest import bare_chart, synth_job


def test_the_budget_covers_exactly_the_jobs_pods_and_admits_one_eviction_at_a_time(cfg):
    mode = RecoveryMode.INPROCESS_FT
    chart = bare_chart()
    TrainingDisruptionBudget(chart, "b", cfg, mode)
    (pdb,) = chart.to_json()
    assert (pdb["apiVersion"], pdb["kind"]) == ("policy/v1", "PodDisruptionBudget")
    assert pdb["metadata"]["name"] == job_name(cfg, mode)
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    pod_labels = synth_job(cfg, mode)["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"] == pod_labels
    other = synth_job(cfg, RecoveryMode.K8S_ONLY)["spec"]["template"]["metadata"]["labels"]
    assert not all(other.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())
