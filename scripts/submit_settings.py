"""What ``scripts/submit.sh`` reads from the configuration, in one Python start: shell assignments for ``eval``.

``python -m scripts.submit_settings MODE`` (the environment from ``PROJECT_ENV``, as :func:`load_config` reads it)
prints one ``name=value`` line per :func:`settings` entry, each value shell-quoted. An unknown MODE exits 2 naming
the allowed ones, a fault schedule that would not fire in the Job exits 2 naming each entry (:func:`fault_problems`),
a configuration that does not validate exits 1 naming its bad fields; either way nothing is printed on stdout, so
``eval`` assigns nothing and no pod starts. The script asked Python once per value before (eight interpreter
starts of about 0.27 CPU-s each on the 2-core machine).
"""

from __future__ import annotations

import shlex
import sys

from charts.image import IMAGE_PLACEHOLDER
from charts.names import dataset_job_name, job_name
from charts.topology import Topology
from platform_config import ProjectConfig, RecoveryMode, exits_on_config_error, load_config
from training.common.arguments import USAGE_ERROR, message
from training.resilience.faults import RunShape, random_problems, schedule_problems


def settings(cfg: ProjectConfig, mode: RecoveryMode) -> dict[str, str]:
    """The submission's names and limits: the AWS region, the namespace, the training Job of ``mode`` and the
    dataset Job with its deadline (seconds), and the image placeholder that must not reach the cluster."""
    return {
        "region": cfg.aws.region,
        "namespace": cfg.job.namespace,
        "job": job_name(cfg, mode),
        "prep": dataset_job_name(cfg),
        "deadline": str(cfg.dataset_prep.active_deadline_seconds),
        "placeholder": IMAGE_PLACEHOLDER,
    }


def fault_problems(cfg: ProjectConfig) -> list[str]:
    """The entries of ``faults.schedule`` (and ``faults.random``) that are malformed or would never fire in the Job:
    a rank outside its ``gpu_nodes.node_count`` x GPUs workers, a step past ``train.steps``."""
    top = Topology.from_config(cfg)
    world = f" (gpu_nodes.node_count {top.nodes} x {top.nproc_per_node} GPUs of {top.instance.name})"
    run = RunShape(cfg.train.steps, top.world_size, cfg.train.eval_interval, world)
    lines = [f"faults.schedule {line}" for line in schedule_problems(cfg.faults.schedule, run)]
    return lines + random_problems(cfg.faults.random.count, cfg.train.steps)


@exits_on_config_error
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    allowed = " ".join(m.value for m in RecoveryMode)
    if len(argv) != 1:
        print(f"usage: python -m scripts.submit_settings MODE   (MODE: {allowed})", file=sys.stderr)
        return 2
    try:
        mode = RecoveryMode(argv[0])
    except ValueError:
        print(f"submit: unknown MODE '{argv[0]}'; allowed: {allowed}", file=sys.stderr)
        return 2
    cfg = load_config()
    bad = fault_problems(cfg)
    if bad:
        print(message("python -m scripts.submit_settings", bad), end="", file=sys.stderr)
        return USAGE_ERROR
    for name, value in settings(cfg, mode).items():
        print(f"{name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
