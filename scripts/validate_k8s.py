"""Strict schema validation of every synthesized Kubernetes manifest (PyPI ``kubernetes-validate``).

``validate_manifests(dist, version)`` checks every document of every ``dist/*.yaml`` against the
Kubernetes OpenAPI schemas of ``version`` in strict mode (unknown fields and wrong types fail), and
fails any manifest text that looks like an unresolved CDK token or a resolver's error message
(``cdk8s-awscdk-resolver`` writes its error text into the manifest and exits 0 when offline).

Run alone: ``python -m scripts.validate_k8s [--dist dist] [--env ENV]``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import kubernetes_validate
import yaml
from kubernetes_validate.utils import InvalidSchemaError, SchemaNotFoundError, VersionNotSupportedError

from platform_config.loader import SAFE_LOADER, exits_on_config_error

#: Text that never belongs in a manifest: unresolved tokens and resolver / AWS CLI / SDK failures.
RESOLVER_ERROR_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"\$\{Token\[",  # an unresolved CDK/cdk8s token
        r"#\{Token\[",
        r"Command failed:",  # execFileSync failure text
        r"An error occurred \(\w+\)",  # AWS CLI error prefix
        r"Unable to locate credentials",
        r"Could not load credentials",
        r"ExpiredToken",
        r"Stack with id \S+ does not exist",
        r"\[object Object\]",
    )
)


def _resolver_errors(path: Path, text: str) -> list[str]:
    errors = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for pattern in RESOLVER_ERROR_PATTERNS:
            if pattern.search(line):
                errors.append(f"{path.name}:{lineno}: looks like a resolver error or unresolved token: {line.strip()}")
    return errors


def _describe(doc: dict) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind', '?')}/{meta.get('name', '?')}"


def validate_manifests(dist: Path, kubernetes_version: str) -> list[str]:
    """Error strings for every invalid document under ``dist`` (empty list = all valid)."""
    dist = Path(dist)
    files = sorted(dist.glob("*.yaml"))
    if not files:
        return [f"no manifests (*.yaml) in {dist}"]
    errors: list[str] = []
    for path in files:
        text = path.read_text()
        errors += _resolver_errors(path, text)
        try:
            docs = [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]
        except yaml.YAMLError as exc:
            errors.append(f"{path.name}: not valid YAML: {exc}")
            continue
        if not docs:
            errors.append(f"{path.name}: holds no documents")
        for i, doc in enumerate(docs):
            where = f"{path.name}[{i}]"
            if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
                errors.append(f"{where}: not a Kubernetes object (needs apiVersion and kind)")
                continue
            if not (doc.get("metadata") or {}).get("name"):
                errors.append(f"{where} {_describe(doc)}: metadata.name is missing")
            try:
                kubernetes_validate.validate(doc, kubernetes_version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                path_str = ".".join(str(p) for p in exc.path) or "<root>"
                errors.append(f"{where} {_describe(doc)}: {path_str}: {exc.message}")
            except (SchemaNotFoundError, VersionNotSupportedError, InvalidSchemaError) as exc:
                errors.append(f"{where} {_describe(doc)}: {type(exc).__name__} (Kubernetes {kubernetes_version}) {exc}")
    return errors


@exits_on_config_error
def main(argv: list[str] | None = None) -> int:
    from platform_config import load_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=Path("dist"))
    parser.add_argument("--env", default=None, help="environment of project.yaml (default: $PROJECT_ENV or default)")
    args = parser.parse_args(argv)
    version = load_config(env=args.env).cluster.kubernetes_version
    errors = validate_manifests(args.dist, version)
    for err in errors:
        print(f"  - {err}")
    print(f"{'FAIL' if errors else 'ok'}: Kubernetes {version} strict schemas over {args.dist}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
