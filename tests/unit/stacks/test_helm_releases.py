"""The Helm release names ``make preflight`` looks for, without aws-cdk-lib."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.training_runs import REPO_ROOT


def test_preflight_reads_the_release_names_without_loading_aws_cdk_lib() -> None:
    """``scripts.preflight`` and this module load no aws-cdk-lib (0.8 CPU-s more for preflight): they were
    imported through the constructs' modules before (cdk8s, for the chart helpers, is another matter)."""
    probe = "import sys, scripts.preflight, stacks.helm_releases; print([m for m in sys.modules if 'aws_cdk' in m])"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_constructs_install_the_releases_named_here() -> None:
    from stacks import device_plugins, helm_releases, node_termination_handler

    assert (device_plugins.NVIDIA_CHART, device_plugins.EFA_CHART) == (
        "nvidia-device-plugin",
        "aws-efa-k8s-device-plugin",
    )
    assert node_termination_handler.CHART == helm_releases.NTH_CHART == "aws-node-termination-handler"
