"""Wait for a Kubernetes Job to complete: ``make submit`` runs the dataset-preparation Job this way before training.

    python -m scripts.wait_job --namespace training --job fsdp-train-prepare-data --timeout 7320

Polls ``kubectl get job -o json`` every ``--interval`` seconds. Exit 0 when the Job has condition ``Complete``,
1 when it has ``Failed`` (e.g. ``DeadlineExceeded`` after ``activeDeadlineSeconds``, or ``BackoffLimitExceeded``)
or does not exist, 2 when ``--timeout`` passes first; each case prints the reason.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from training.common.arguments import number, parse


def job_state(job: dict) -> tuple[str, str]:
    """(``complete`` | ``failed`` | ``running``, detail) from a Job object's status."""
    status = job.get("status", {})
    for condition in status.get("conditions", []):
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return "complete", f"completed at {condition.get('lastTransitionTime', '?')}"
        if condition.get("type") == "Failed":
            return "failed", f"{condition.get('reason', 'Failed')}: {condition.get('message', '')}".rstrip(": ")
    return "running", f"active {status.get('active', 0)}, failed pods {status.get('failed', 0)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.wait_job", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--timeout", type=number(float, at_least=0), required=True, help="seconds")
    parser.add_argument("--interval", type=number(float, above=0), default=10.0, help="seconds between polls")
    args = parse(parser, argv)
    deadline = time.monotonic() + args.timeout
    last = ""
    while True:
        done = subprocess.run(
            ["kubectl", "-n", args.namespace, "get", "job", args.job, "-o", "json"], capture_output=True, text=True
        )
        if done.returncode != 0:
            print(f"wait_job: {args.namespace}/{args.job}: {done.stderr.strip()}", file=sys.stderr)
            return 1
        state, detail = job_state(json.loads(done.stdout))
        if detail != last:
            print(f"wait_job: {args.namespace}/{args.job}: {state} ({detail})", flush=True)
            last = detail
        if state == "complete":
            return 0
        if state == "failed":
            return 1
        if time.monotonic() >= deadline:
            print(f"wait_job: {args.namespace}/{args.job}: still running after {args.timeout:g} s", file=sys.stderr)
            return 2
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
