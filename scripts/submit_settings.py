"""What ``scripts/submit.sh`` reads from the configuration, in one Python start: shell assignments for ``eval``.

``python -m scripts.submit_settings MODE`` (the environment from ``PROJECT_ENV``, as :func:`load_config` reads it)
prints one ``name=value`` line per :func:`settings` entry, each value shell-quoted. An unknown MODE exits 2 naming
the allowed ones, a configuration that does not validate exits 1 naming its bad fields; either way nothing is
printed on stdout, so ``eval`` assigns nothing. The script asked Python once per value before (eight interpreter
starts of about 0.27 CPU-s each on the 2-core machine).
"""

from __future__ import annotations

import shlex
import sys

from charts.image import IMAGE_PLACEHOLDER
from charts.names import dataset_job_name, job_name
from platform_config import ProjectConfig, RecoveryMode, exits_on_config_error, load_config


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
    for name, value in settings(load_config(), mode).items():
        print(f"{name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
