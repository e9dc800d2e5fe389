"""Run every validator over the synthesized output: `python -m scripts.validate`.

- CloudFormation (``cdk.out``): cfn-lint on every template and the CDK validation report
  (cdk-nag runs inside ``cdk synth`` itself and fails the synth on unacknowledged findings).
- Kubernetes (``dist``): strict schema validation for the configured Kubernetes version.

Exits non-zero and lists every error when anything fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from platform_config import exits_on_config_error, load_config
from scripts.validate_cfn import validate_cdk_out
from scripts.validate_k8s import validate_manifests


@exits_on_config_error
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cdk-out", type=Path, default=Path("cdk.out"))
    parser.add_argument("--dist", type=Path, default=Path("dist"))
    parser.add_argument("--env", default="default", help="environment of project.yaml (for the Kubernetes version)")
    args = parser.parse_args(argv)

    cfg = load_config(env=args.env)
    checks = {
        f"CloudFormation ({args.cdk_out})": validate_cdk_out(args.cdk_out),
        f"Kubernetes {cfg.cluster.kubernetes_version} schemas ({args.dist})": validate_manifests(
            args.dist, cfg.cluster.kubernetes_version
        ),
    }
    failed = False
    for name, errors in checks.items():
        if errors:
            failed = True
            print(f"FAIL {name}: {len(errors)} error(s)")
            for err in errors:
                print(f"  - {err}")
        else:
            print(f"ok   {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
