"""Follow the training Job ``make submit`` applied, until it ends: what an operator would otherwise piece together.

    python -m scripts.follow_job --namespace training --job fsdp-train-inprocess-ft [--interval 10] [--timeout S]

Every ``--interval`` seconds it reads the Job, its pods (label ``batch.kubernetes.io/job-name``), their
FailedScheduling events and their logs through ``kubectl``, and prints what changed:

* each pod's phase, its container's waiting reason (``ContainerCreating``, ``ImagePullBackOff``), a terminating pod,
  a finished container's exit code, and a ``DisruptionTarget`` condition with its reason;
* each FailedScheduling event's message (a replacement pod waiting for a node);
* every pod's supervisor lines (``[supervisor] ...``: launches, relaunches and why);
* the Job's ``FailureTarget`` / ``Failed`` condition with its message: the podFailurePolicy rule that matched.

It ends with one line: ``Complete`` (exit 0) or ``Failed: <reason>: <message>`` (exit 1); exit 2 when ``--timeout``
passes first or kubectl fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from training.common.arguments import number, parse

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
SUPERVISOR = "[supervisor]"


def pod_line(pod: dict[str, Any]) -> str:
    """One pod as ``<name> on <node>: <phase>[, <reason>]...``."""
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    parts = [status.get("phase", "Unknown")]
    if meta.get("deletionTimestamp"):
        parts.append("Terminating")
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state", {})
        if "waiting" in state:
            parts.append(f"waiting: {state['waiting'].get('reason', '?')}")
        elif "terminated" in state:
            t = state["terminated"]
            parts.append(f"exited {t.get('exitCode', '?')} ({t.get('reason', '')})".replace(" ()", ""))
    for c in status.get("conditions") or []:
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            parts.append(f"DisruptionTarget: {c.get('reason', '')}")
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            parts.append(f"unschedulable: {c.get('reason', '')}")
    return f"{meta['name']} on {spec.get('nodeName') or '(no node)'}: {', '.join(parts)}"


def job_end(job: dict[str, Any]) -> tuple[str | None, str]:
    """(``Complete`` | ``Failed`` | None while it runs, the podFailurePolicy or failure message so far)."""
    message = ""
    for c in job.get("status", {}).get("conditions") or []:
        if c.get("status") != "True":
            continue
        if c.get("type") in ("FailureTarget", "Failed"):
            message = f"{c.get('reason', '')}: {c.get('message', '')}"
        if c.get("type") in ("Complete", "Failed"):
            return c["type"], message
    return None, message


def scheduling_failures(events: dict[str, Any], pods: set[str]) -> list[tuple[str, str]]:
    """(event uid, ``pod: message``) of the FailedScheduling events of ``pods``."""
    out = []
    for e in events.get("items", []):
        obj = e.get("involvedObject", {})
        if e.get("reason") == "FailedScheduling" and obj.get("name") in pods:
            key = f"{e['metadata'].get('uid', '')}/{e.get('count', 1)}"
            out.append((key, f"{obj['name']}: FailedScheduling: {e.get('message', '')}"))
    return out


class Follower:
    """What was printed already, so that each poll prints only what changed."""

    def __init__(self, namespace: str, job: str) -> None:
        self.namespace, self.job = namespace, job
        self.pod_lines: dict[str, str] = {}
        self.log_lines: dict[str, int] = {}
        self.events: set[str] = set()
        self.message = ""

    def kubectl(self, *args: str) -> str:
        done = subprocess.run(["kubectl", "-n", self.namespace, *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def poll(self) -> str | None:
        """Print what changed; the Job's end (``Complete`` / ``Failed``) or None."""
        job = json.loads(self.kubectl("get", "job", self.job, "-o", "json"))
        pods = json.loads(self.kubectl("get", "pods", "-l", f"{JOB_NAME_LABEL}={self.job}", "-o", "json"))["items"]
        for pod in pods:
            name, line = pod["metadata"]["name"], pod_line(pod)
            if self.pod_lines.get(name) != line:
                self.pod_lines[name] = line
                print(f"pod   {line}", flush=True)
            if pod.get("spec", {}).get("nodeName"):
                self._supervisor_lines(name)
        events = json.loads(self.kubectl("get", "events", "--field-selector", "reason=FailedScheduling", "-o", "json"))
        for key, text in scheduling_failures(events, {p["metadata"]["name"] for p in pods}):
            if key not in self.events:
                self.events.add(key)
                print(f"event {text}", flush=True)
        end, message = job_end(job)
        if message and message != self.message:
            self.message = message
            print(f"job   {self.job}: {message}", flush=True)
        return end

    def _supervisor_lines(self, pod: str) -> None:
        try:
            log = self.kubectl("logs", pod)
        except RuntimeError:
            return  # not started yet, or gone
        lines = [x for x in log.splitlines() if SUPERVISOR in x]
        for line in lines[self.log_lines.get(pod, 0) :]:
            print(f"log   {pod}: {line}", flush=True)
        self.log_lines[pod] = len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.follow_job", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--interval", type=number(float, above=0), default=10.0, help="seconds between polls")
    parser.add_argument("--timeout", type=number(float, above=0), default=None, help="seconds (default: none)")
    args = parse(parser, argv)
    follower = Follower(args.namespace, args.job)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    while True:
        try:
            end = follower.poll()
        except RuntimeError as err:
            print(f"follow_job: {err}", file=sys.stderr)
            return 2
        if end == "Complete":
            print(f"== Job {args.namespace}/{args.job}: Complete ==", flush=True)
            return 0
        if end == "Failed":
            print(f"== Job {args.namespace}/{args.job}: Failed: {follower.message} ==", flush=True)
            return 1
        if deadline is not None and time.monotonic() >= deadline:
            print(f"follow_job: {args.namespace}/{args.job} still running after {args.timeout:g} s", file=sys.stderr)
            return 2
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
