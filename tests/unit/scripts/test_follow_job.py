"""Following the training Job: pod lines, FailedScheduling events, supervisor lines, the podFailurePolicy message
and a clear end, against kubectl output stood in for by JSON of the real objects' shape."""

from __future__ import annotations

import json

from scripts import follow_job
from scripts.follow_job import Follower, job_end, pod_line, scheduling_failures

JOB = "fsdp-train-inprocess-ft"
FAIL_MESSAGE = "Container trainer for pod p-1b failed with exit code 42 matching FailJob rule at index 0"


def pod(name, node=None, phase="Pending", state=None, conditions=(), deleting=False):
    meta = {"name": name, **({"deletionTimestamp": "2026-12-07T10:00:00Z"} if deleting else {})}
    status = {"phase": phase, "conditions": list(conditions)}
    if state is not None:
        status["containerStatuses"] = [{"name": "trainer", "state": state}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def job(*conditions):
    return {"status": {"conditions": [{"status": "True", **c} for c in conditions]}}


FAILED = job(
    {"type": "FailureTarget", "reason": "PodFailurePolicy", "message": FAIL_MESSAGE},
    {"type": "Failed", "reason": "PodFailurePolicy", "message": FAIL_MESSAGE},
)


def test_pod_lines_say_phase_waiting_reason_exit_code_and_disruption():
    pending = pod("p-1", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
    assert pod_line(pending) == "p-1 on (no node): Pending, unschedulable: Unschedulable"
    creating = pod("p-1", "ip-10-0-1-5", state={"waiting": {"reason": "ContainerCreating"}})
    assert pod_line(creating) == "p-1 on ip-10-0-1-5: Pending, waiting: ContainerCreating"
    lost = pod(
        "p-0",
        "ip-10-0-1-4",
        "Running",
        {"running": {}},
        [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}],
        deleting=True,
    )
    assert pod_line(lost) == "p-0 on ip-10-0-1-4: Running, Terminating, DisruptionTarget: DeletionByTaintManager"
    failed = pod("p-1", "ip-10-0-1-5", "Failed", {"terminated": {"exitCode": 42, "reason": "Error"}})
    assert pod_line(failed) == "p-1 on ip-10-0-1-5: Failed, exited 42 (Error)"


def test_the_end_and_the_pod_failure_policy_message():
    assert job_end(job()) == (None, "")
    assert job_end(job({"type": "Complete"})) == ("Complete", "")
    assert job_end(FAILED) == ("Failed", f"PodFailurePolicy: {FAIL_MESSAGE}")
    assert job_end(job({"type": "FailureTarget", "reason": "PodFailurePolicy", "message": "m"})) == (
        None,
        "PodFailurePolicy: m",
    )


def test_scheduling_failures_of_the_jobs_pods_only():
    events = {
        "items": [
            {
                "metadata": {"uid": "u1"},
                "reason": "FailedScheduling",
                "count": 2,
                "involvedObject": {"name": "p-1"},
                "message": "0/9 nodes are available: 9 Insufficient nvidia.com/gpu.",
            },
            {"metadata": {"uid": "u2"}, "reason": "FailedScheduling", "involvedObject": {"name": "other"}},
        ]
    }
    assert scheduling_failures(events, {"p-1"}) == [
        ("u1/2", "p-1: FailedScheduling: 0/9 nodes are available: 9 Insufficient nvidia.com/gpu.")
    ]


class FakeCluster:
    """kubectl's answers, poll by poll: the replacement pod waits for a node, starts, then fails the Job."""

    def __init__(self):
        self.poll = 0
        self.event = {
            "metadata": {"uid": "u1"},
            "reason": "FailedScheduling",
            "involvedObject": {"name": "p-1b"},
            "message": "0/2 nodes are available",
        }

    def __call__(self, *args):
        if args[:2] == ("get", "job"):
            self.poll += 1
            return json.dumps(FAILED if self.poll >= 3 else job())
        if args[:2] == ("get", "pods"):
            p1 = pod("p-1b") if self.poll == 1 else pod("p-1b", "n3", "Running", {"running": {}})
            return json.dumps({"items": [pod("p-0", "n1", "Running", {"running": {}}), p1]})
        if args[:2] == ("get", "events"):
            return json.dumps({"items": [self.event]})
        if args[0] == "logs":
            lines = ["[supervisor] node 0 of 2, attempt 0, launch 0: ft_launcher (inprocess-ft)", "noise"]
            if self.poll >= 2:
                lines.append("[supervisor] launcher exited 1: relaunch a peer was lost")
            return "\n".join(lines) + "\n"
        raise AssertionError(args)


def test_following_prints_what_changed_and_ends_with_the_reason(monkeypatch, capsys):
    monkeypatch.setattr(Follower, "kubectl", lambda self, *a: cluster(*a))
    cluster = FakeCluster()
    code = follow_job.main(["--namespace", "training", "--job", JOB, "--interval", "0.01"])
    assert code == 1
    assert capsys.readouterr().out.splitlines() == [
        "pod   p-0 on n1: Running",
        "log   p-0: [supervisor] node 0 of 2, attempt 0, launch 0: ft_launcher (inprocess-ft)",
        "pod   p-1b on (no node): Pending",
        "event p-1b: FailedScheduling: 0/2 nodes are available",
        "log   p-0: [supervisor] launcher exited 1: relaunch a peer was lost",
        "pod   p-1b on n3: Running",
        "log   p-1b: [supervisor] node 0 of 2, attempt 0, launch 0: ft_launcher (inprocess-ft)",
        "log   p-1b: [supervisor] launcher exited 1: relaunch a peer was lost",
        f"job   {JOB}: PodFailurePolicy: {FAIL_MESSAGE}",
        f"== Job training/{JOB}: Failed: PodFailurePolicy: {FAIL_MESSAGE} ==",
    ]


def test_a_kubectl_error_ends_with_2(monkeypatch, capsys):
    def broken(self, *args):
        raise RuntimeError("kubectl get job x: NotFound")

    monkeypatch.setattr(Follower, "kubectl", broken)
    assert follow_job.main(["--namespace", "training", "--job", "x", "--interval", "0.01"]) == 2
    assert "follow_job: kubectl get job x: NotFound" in capsys.readouterr().err


def test_a_complete_job_ends_with_0(monkeypatch, capsys):
    answers = {"job": job({"type": "Complete"}), "pods": {"items": []}, "events": {"items": []}}
    monkeypatch.setattr(Follower, "kubectl", lambda self, *a: json.dumps(answers[a[1]]))
    assert follow_job.main(["--namespace", "training", "--job", JOB]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"== Job training/{JOB}: Complete =="
