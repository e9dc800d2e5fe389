"""The Job controller's documented semantics for an Indexed Job, as a small state machine without processes.

Each rule cites where Kubernetes documents it (https://kubernetes.io/docs/concepts/workloads/controllers/job/ is
"Job" below; the controller source is ``pkg/controller/job``):

* **Indexed completion** ("Completion mode"): one pod per index ``0..completions-1``, at most ``parallelism`` active;
  an index succeeds when its pod exits 0; the Job is ``Complete`` when every index succeeded.
* **Pod replacement** ("Delayed creation of replacement pods"): with ``podReplacementPolicy: Failed`` a replacement
  is created only once the old pod is terminal (fully terminated), not when it starts terminating.
* **Pod failure policy** ("Pod failure policy"): rules are evaluated in order and the first match wins; ``onExitCodes``
  looks at the container's exit code (0 never matches; a pod whose container has no exit code, e.g. on a lost
  node, matches no exit-code rule); ``onPodConditions`` at the pod's conditions. Actions: ``FailJob`` (the Job fails
  and its pods are terminated), ``FailIndex`` (the index fails), ``Ignore`` (not counted; replaced), ``Count``; no
  match = ``Count``. A pod that ends once the Job has finished (a failed Job's running pods are terminated: "Job
  termination and cleanup") is neither matched nor counted: its action here is :data:`JOB_FINISHED`.
* **Back-off limit per index** ("Backoff limit per index"): counted failures of an index are kept in the pod
  annotation ``batch.kubernetes.io/job-index-failure-count`` and ignored ones in
  ``batch.kubernetes.io/job-index-ignored-failure-count`` (set only when > 0; ``getNewIndexFailureCounts``); an
  index fails when a counted failure happens at a failure count >= ``backoffLimitPerIndex`` (``isIndexFailed``);
  the Job fails when failed indexes exceed ``maxFailedIndexes`` (reason ``MaxFailedIndexesExceeded``), or, once
  no index is left running, when any index failed (reason ``FailedIndexes``).
* **Back-off limit** ("Pod backoff failure policy"): the Job fails when counted failures exceed ``backoffLimit``
  (reason ``BackoffLimitExceeded``; ``exceedsBackoffLimit := failed > backoffLimit``).
* **Re-creation back-off** ("Pod backoff failure policy": 10 s, 20 s, 40 s ..., capped at six minutes): per index
  the delay is ``base x 2^(n-1)`` where ``n`` is the failed pod's counted plus ignored failures, plus one
  (``getRemainingTimePerIndex``), measured from when the pod finished. ``base`` and the cap are scaled down locally.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any

from training.cluster.manifest import JobManifest, PodFailurePolicyRule

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
DISRUPTION_TARGET = "DisruptionTarget"
#: The action recorded for a pod that ended after the Job had finished: no podFailurePolicy rule applied to it.
JOB_FINISHED = "None (the Job had finished)"
#: Kubernetes' defaults (``DefaultJobPodFailureBackOff``, ``MaxJobPodFailureBackOff``).
BACKOFF_BASE_S = 10.0
BACKOFF_MAX_S = 360.0


def match_rule(
    rules: list[PodFailurePolicyRule],
    container: str,
    exit_code: int | None,
    conditions: dict[str, str],
) -> tuple[str, int | None]:
    """(action, index of the matching rule) for a failed pod; ``("Count", None)`` when no rule matches."""
    for i, rule in enumerate(rules):
        if rule.conditions:
            if any(conditions.get(kind) == status for kind, status in rule.conditions):
                return rule.action, i
            continue
        if exit_code is None or exit_code == 0:
            continue
        if rule.container_name not in (None, container):
            continue
        inside = exit_code in rule.values
        if (rule.operator == "In" and inside) or (rule.operator == "NotIn" and not inside):
            return rule.action, i
    return "Count", None


@dataclass
class PodRun:
    """One pod of the Job, from creation to its terminal state."""

    index: int
    name: str
    failures: int  # counted failures of the index before this pod (its failure-count annotation)
    ignored: int  # ignored failures of the index before this pod
    created_at: float
    node: str
    exit_code: int | None = None
    finished_at: float | None = None  # when the container stopped (or the node was lost)
    terminal_at: float | None = None  # when the pod object is terminal (replacement allowed)
    conditions: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    action: str | None = None
    rule: int | None = None

    @property
    def attempt(self) -> int:
        """Every earlier pod of this index, counted or ignored."""
        return self.failures + self.ignored

    indexed: bool = True

    @property
    def annotations(self) -> dict[str, str]:
        """What the Job controller annotates on the pods of an Indexed Job with ``backoffLimitPerIndex``."""
        if not self.indexed:
            return {}
        out = {COMPLETION_INDEX: str(self.index), FAILURE_COUNT: str(self.failures)}
        if self.ignored:
            out[IGNORED_FAILURE_COUNT] = str(self.ignored)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "node": self.node,
            "attempt": self.attempt,
            "annotations": self.annotations,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "exit_code": self.exit_code,
            "conditions": [
                {"type": k, "status": v, "reason": self.reasons.get(k, "")} for k, v in sorted(self.conditions.items())
            ],
            "pod_failure_policy_action": self.action,
            "pod_failure_policy_rule": self.rule,
        }


@dataclass
class IndexState:
    failures: int = 0
    ignored: int = 0
    succeeded: bool = False
    failed: bool = False
    pod: PodRun | None = None
    create_after: float = 0.0


class JobController:
    """Decides which pods to create and what each pod's end means; the runner does the processes."""

    def __init__(
        self,
        job: JobManifest,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        seed: int = 0,
    ) -> None:
        if job.indexed and job.backoff_limit_per_index is None:
            raise ValueError("the local Job controller implements Indexed Jobs with backoffLimitPerIndex only")
        self.job = job
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.indexes = [IndexState() for _ in range(job.completions)]
        self.pods: list[PodRun] = []
        self.counted_failures = 0
        self.condition: dict[str, str] | None = None
        self.start_time: float | None = None
        self.completion_time: float | None = None
        self._rng = random.Random(f"{job.name}/{seed}")  # pod-name suffixes, reproducible per Job

    @property
    def finished(self) -> bool:
        return self.condition is not None

    def active(self) -> list[PodRun]:
        """Pods not yet terminal (running, or terminating on a lost node)."""
        return [s.pod for s in self.indexes if s.pod is not None and s.pod.terminal_at is None]

    def due(self, now: float) -> list[int]:
        """Indexes that need a pod now: no pod (or a terminal one), not done, back-off elapsed, within parallelism."""
        if self.finished:
            return []
        room = self.job.parallelism - len(self.active())
        out = []
        for i, s in enumerate(self.indexes):
            if room <= 0:
                break
            if s.succeeded or s.failed or (s.pod is not None and s.pod.terminal_at is None):
                continue
            if now >= s.create_after:
                out.append(i)
                room -= 1
        return out

    def create(self, index: int, now: float, node: str) -> PodRun:
        """Record a new pod for ``index`` (name ``<job>-<index>-<5 random chars>``, annotations set)."""
        s = self.indexes[index]
        suffix = "".join(self._rng.choices(string.ascii_lowercase + string.digits, k=5))
        name = f"{self.job.name}-{index}-{suffix}" if self.job.indexed else f"{self.job.name}-{suffix}"
        pod = PodRun(index, name, s.failures, s.ignored, now, node, indexed=self.job.indexed)
        s.pod = pod
        self.pods.append(pod)
        if self.start_time is None:
            self.start_time = now
        return pod

    def disrupted(self, pod: PodRun, reason: str) -> None:
        """The pod got the ``DisruptionTarget`` condition (eviction, taint-based deletion of a lost node's pod)."""
        pod.conditions[DISRUPTION_TARGET] = "True"
        pod.reasons[DISRUPTION_TARGET] = reason

    def terminated(self, pod: PodRun, exit_code: int | None, now: float, *, terminal_at: float | None = None) -> str:
        """The pod's container ended (``exit_code`` None: unknown, its node was lost); returns the action taken.

        ``terminal_at``: when the pod object becomes terminal (later than ``now`` for a lost node's pod, which stays
        terminating until the node is deleted); the replacement waits for it (``podReplacementPolicy: Failed``).
        """
        pod.exit_code = exit_code
        pod.finished_at = now
        pod.terminal_at = terminal_at if terminal_at is not None else now
        s = self.indexes[pod.index]
        if exit_code == 0:
            pod.action = "Succeeded"
            s.succeeded = True
            self._maybe_complete(now)
            return pod.action
        if self.finished:  # terminated because the Job had ended: the controller no longer applies its policy
            pod.action = JOB_FINISHED
            return pod.action
        action, rule = match_rule(self.job.rules, self.job.container.name, exit_code, pod.conditions)
        pod.action, pod.rule = action, rule
        if action == "FailJob":
            self.fail(
                now,
                "PodFailurePolicy",
                f"Container {self.job.container.name} for pod {pod.name} failed "
                f"with exit code {exit_code} matching FailJob rule at index {rule}",
            )
            return action
        if action == "Ignore":
            s.ignored += 1
        else:
            per_index = self.job.backoff_limit_per_index
            if action == "FailIndex" or (per_index is not None and s.failures >= per_index):
                s.failed = True
            s.failures += 1
            if action != "FailIndex":
                self.counted_failures += 1
        absolute = pod.failures + pod.ignored + 1
        delay = min(self.backoff_base_s * 2 ** (absolute - 1), self.backoff_max_s)
        s.create_after = max(pod.terminal_at, pod.finished_at + delay)
        self._check_limits(now)
        return action

    def _check_limits(self, now: float) -> None:
        failed = [i for i, s in enumerate(self.indexes) if s.failed]
        if self.job.max_failed_indexes is not None and len(failed) > self.job.max_failed_indexes:
            self.fail(now, "MaxFailedIndexesExceeded", f"Job has failed indexes {failed}")
        elif self.counted_failures > self.job.backoff_limit:
            self.fail(now, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif failed and all(s.succeeded or s.failed for s in self.indexes):
            self.fail(now, "FailedIndexes", f"Job has failed indexes {failed}")

    def _maybe_complete(self, now: float) -> None:
        if all(s.succeeded for s in self.indexes):
            self.condition = {
                "type": "Complete",
                "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods",
            }
            self.completion_time = now
        else:
            self._check_limits(now)

    def fail(self, now: float, reason: str, message: str) -> None:
        self.condition = {"type": "Failed", "reason": reason, "message": message}
        self.completion_time = now

    def status(self) -> dict[str, Any]:
        """The Job's status in the shape of ``batch/v1`` ``JobStatus``, plus one entry per pod."""
        conditions = []
        if self.condition is not None:
            first = "SuccessCriteriaMet" if self.condition["type"] == "Complete" else "FailureTarget"
            conditions = [{**self.condition, "type": first, "status": "True"}, {**self.condition, "status": "True"}]
        return {
            "name": self.job.name,
            "conditions": conditions,
            "startTime": self.start_time,
            "completionTime": self.completion_time,
            "active": len(self.active()),
            "succeeded": sum(s.succeeded for s in self.indexes),
            "failed": self.counted_failures,
            "ignoredFailures": sum(s.ignored for s in self.indexes),
            "completedIndexes": ",".join(str(i) for i, s in enumerate(self.indexes) if s.succeeded),
            "failedIndexes": ",".join(str(i) for i, s in enumerate(self.indexes) if s.failed),
            "pods": [p.to_json() for p in self.pods],
        }
