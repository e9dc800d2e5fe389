"""Pinned platform versions: every accepted Kubernetes minor has its kubectl layer pinned and its add-ons pinned."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from platform_config.versions import (
    DEFAULT_ADDON_VERSIONS,
    DEFAULT_KUBERNETES_VERSION,
    MANAGED_ADDONS,
    SUPPORTED_KUBERNETES_MINORS,
    kubectl_layer_package,
    supported_versions_text,
)

REQUIREMENTS = Path(__file__).resolve().parents[3] / "requirements.txt"


def pins() -> dict[str, str]:
    out = {}
    for line in REQUIREMENTS.read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_supported_range() -> None:
    assert SUPPORTED_KUBERNETES_MINORS == (32, 33, 34, 35, 36)
    assert DEFAULT_KUBERNETES_VERSION == "1.36"
    assert supported_versions_text() == "1.32 .. 1.36"


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_MINORS)
def test_kubectl_layer_of_every_minor_is_pinned_and_installed(minor: int) -> None:
    package = kubectl_layer_package(minor)
    assert package == f"aws-cdk.lambda-layer-kubectl-v{minor}"
    assert package in pins(), f"{package} is not pinned in requirements.txt"
    module = importlib.import_module(f"aws_cdk.lambda_layer_kubectl_v{minor}")
    assert hasattr(module, f"KubectlV{minor}Layer")


def test_addon_table_covers_every_minor_and_addon() -> None:
    assert set(DEFAULT_ADDON_VERSIONS) == set(SUPPORTED_KUBERNETES_MINORS)
    for minor, versions in DEFAULT_ADDON_VERSIONS.items():
        assert tuple(versions) == MANAGED_ADDONS
        assert all(re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", v) for v in versions.values()), versions
        assert versions["kube-proxy"].startswith(f"v1.{minor}.")
