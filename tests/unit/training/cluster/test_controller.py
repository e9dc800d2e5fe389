"""The local Job controller against the Job controller's documented semantics (known cases, no processes)."""

from __future__ import annotations

import pytest

from training.cluster.controller import (
    FAILURE_COUNT,
    IGNORED_FAILURE_COUNT,
    JOB_FINISHED,
    JobController,
    match_rule,
)
from training.cluster.manifest import Container, JobManifest, PodFailurePolicyRule

FAIL_JOB = PodFailurePolicyRule("FailJob", "trainer", "In", (2, 20, 42))
IGNORE_DISRUPTION = PodFailurePolicyRule("Ignore", conditions=(("DisruptionTarget", "True"),))


def job(*, completions=2, per_index=3, max_failed=0, backoff_limit=6, rules=(FAIL_JOB, IGNORE_DISRUPTION)):
    return JobManifest(
        name="train",
        namespace="training",
        completions=completions,
        parallelism=completions,
        backoff_limit=backoff_limit,
        backoff_limit_per_index=per_index,
        max_failed_indexes=max_failed,
        pod_replacement_policy="Failed",
        rules=list(rules),
        container=Container("trainer", "img", ["bash", "-c", "true"], [], []),
        volumes={},
        subdomain="train",
        termination_grace_s=30,
    )


@pytest.mark.parametrize(
    ("exit_code", "conditions", "expected"),
    [
        (42, {}, ("FailJob", 0)),
        (20, {}, ("FailJob", 0)),
        (10, {}, ("Count", None)),  # no rule matches: counted
        (137, {"DisruptionTarget": "True"}, ("Ignore", 1)),
        (42, {"DisruptionTarget": "True"}, ("FailJob", 0)),  # rules in order: the first match wins
        (None, {"DisruptionTarget": "True"}, ("Ignore", 1)),  # a lost node's pod has no exit code
        (None, {}, ("Count", None)),
    ],
)
def test_pod_failure_policy_rules_in_order(exit_code, conditions, expected):
    assert match_rule([FAIL_JOB, IGNORE_DISRUPTION], "trainer", exit_code, conditions) == expected


def test_not_in_matches_any_other_nonzero_code_of_the_named_container():
    rule = PodFailurePolicyRule("FailIndex", "trainer", "NotIn", (10, 11))
    assert match_rule([rule], "trainer", 12, {}) == ("FailIndex", 0)
    assert match_rule([rule], "trainer", 10, {}) == ("Count", None)
    assert match_rule([rule], "other", 12, {}) == ("Count", None)


def test_indexed_pods_annotations_and_completion():
    c = JobController(job())
    assert c.due(0.0) == [0, 1]
    p0, p1 = c.create(0, 0.0, "n1"), c.create(1, 0.0, "n2")
    assert p0.name.startswith("train-0-") and len(p0.name) == len("train-0-") + 5
    assert p0.annotations == {"batch.kubernetes.io/job-completion-index": "0", FAILURE_COUNT: "0"}
    assert c.due(1.0) == []
    assert c.terminated(p0, 0, 5.0) == "Succeeded"
    assert not c.finished
    c.terminated(p1, 0, 6.0)
    assert c.condition["type"] == "Complete"
    status = c.status()
    assert [x["type"] for x in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert (status["succeeded"], status["failed"], status["completedIndexes"]) == (2, 0, "0,1")


def test_counted_failures_back_off_exponentially_per_index_and_fail_the_index_at_the_limit():
    c = JobController(job(per_index=2, max_failed=0), backoff_base_s=1.0, backoff_max_s=3.0)
    c.create(0, 0.0, "n")
    pod = c.create(1, 0.0, "n")
    times = []
    for t in (10.0, 20.0):
        assert c.terminated(pod, 10, t) == "Count"
        times.append(c.indexes[1].create_after - t)
        pod = c.create(1, t + 5.0, "n")
    assert times == [1.0, 2.0]  # 1 s, then 2 s (Kubernetes: 10 s, 20 s, ... scaled)
    assert pod.annotations[FAILURE_COUNT] == "2"
    c.terminated(pod, 10, 30.0)  # third counted failure at a failure count of 2 = backoffLimitPerIndex
    assert c.indexes[1].failed
    assert c.condition == {
        "type": "Failed",
        "reason": "MaxFailedIndexesExceeded",
        "message": "Job has failed indexes [1]",
    }


def test_the_back_off_is_capped():
    c = JobController(job(per_index=10), backoff_base_s=1.0, backoff_max_s=3.0)
    pod = c.create(0, 0.0, "n")
    for t in range(1, 5):
        c.terminated(pod, 10, float(t * 100))
        pod = c.create(0, t * 100 + 50.0, "n")
    assert c.indexes[0].create_after - 400.0 == 3.0  # 1, 2, 3 (not 4), 3


def test_ignored_failures_are_annotated_and_delay_the_replacement_like_counted_ones():
    c = JobController(job(), backoff_base_s=1.0)
    c.create(0, 0.0, "n")
    pod = c.create(1, 0.0, "n")
    c.disrupted(pod, "DeletionByTaintManager")
    # A lost node: no exit code, and the pod stays terminating until the node is gone (replacement after 5 s).
    assert c.terminated(pod, None, 10.0, terminal_at=15.0) == "Ignore"
    assert c.counted_failures == 0
    assert c.due(14.9) == [] and c.due(15.0) == [1]
    new = c.create(1, 15.0, "n")
    assert new.annotations == {
        "batch.kubernetes.io/job-completion-index": "1",
        FAILURE_COUNT: "0",
        IGNORED_FAILURE_COUNT: "1",
    }
    assert new.attempt == 1
    c.disrupted(new, "EvictionByEvictionAPI")
    c.terminated(new, 143, 20.0)
    assert c.indexes[1].create_after == 22.0  # second pod of the index: 2 s back-off


def test_fail_job_ends_the_job_at_once():
    c = JobController(job())
    c.create(0, 0.0, "n")
    pod = c.create(1, 0.0, "n")
    assert c.terminated(pod, 42, 3.0) == "FailJob"
    assert c.condition["reason"] == "PodFailurePolicy"
    assert "exit code 42 matching FailJob rule at index 0" in c.condition["message"]
    assert c.due(100.0) == []


def test_a_pod_terminated_after_the_job_failed_is_neither_matched_nor_counted():
    """Index 0's pod, terminated because index 1's FailJob ended the Job, exits 143 (no rule matches: it would have
    been counted) or 42 (a FailJob code): either way no action, no failure, and the Job's reason stays the first."""
    for code in (143, 42):
        c = JobController(job())
        p0, p1 = c.create(0, 0.0, "n"), c.create(1, 0.0, "n")
        c.terminated(p1, 42, 3.0)
        assert c.terminated(p0, code, 4.0) == JOB_FINISHED
        assert (p0.action, p0.rule, c.counted_failures, c.indexes[0].failures) == (JOB_FINISHED, None, 0, 0)
        assert c.status()["pods"][0]["pod_failure_policy_action"] == JOB_FINISHED
        assert c.condition["reason"] == "PodFailurePolicy"
        assert f"for pod {p1.name} failed with exit code 42" in c.condition["message"]


def test_backoff_limit_counts_failures_across_indexes():
    c = JobController(job(per_index=5, max_failed=None, backoff_limit=2), backoff_base_s=0.0)
    for t in range(3):
        pod = c.create(t % 2, float(t), "n")
        c.terminated(pod, 10, float(t))
    assert c.condition["reason"] == "BackoffLimitExceeded"


def test_a_failed_index_fails_the_job_once_nothing_else_runs_when_max_failed_indexes_allows_it():
    c = JobController(job(per_index=0, max_failed=1), backoff_base_s=0.0)
    p0, p1 = c.create(0, 0.0, "n"), c.create(1, 0.0, "n")
    c.terminated(p0, 10, 1.0)
    assert c.indexes[0].failed and not c.finished
    c.terminated(p1, 0, 2.0)
    assert c.condition["reason"] == "FailedIndexes"
