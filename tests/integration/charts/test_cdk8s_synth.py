"""``cdk8s synth`` (the real CLI, cdk8s.yaml at the repo root) writes valid manifests for every variant."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from charts.main import CONFIG_CHART, DATASET_CHART, PREPULL_CHART, SERVICE_CHART, manifest_file, training_chart_id
from platform_config import RecoveryMode, load_config
from scripts.validate_k8s import validate_manifests

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
CDK8S = REPO / "node_modules" / ".bin" / "cdk8s"


@pytest.mark.skipif(not CDK8S.exists(), reason="node_modules not installed (scripts/setup.sh)")
@pytest.mark.parametrize("env", ["default", "prod"])
def test_cdk8s_cli_synth_validates(tmp_path, env):
    out = tmp_path / "dist"
    environ = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PROJECT_ENV": env,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    environ.pop("TRAINING_IMAGE_URI", None)
    subprocess.run([str(CDK8S), "synth", "--no-check-upgrade", "-o", str(out)], cwd=REPO, env=environ, check=True)
    charts = [CONFIG_CHART, SERVICE_CHART, DATASET_CHART, PREPULL_CHART, *map(training_chart_id, RecoveryMode)]
    assert sorted(p.name for p in out.iterdir()) == sorted(map(manifest_file, charts))
    assert validate_manifests(out, load_config(env=env).cluster.kubernetes_version) == []
    assert f"completions: {load_config(env=env).gpu_nodes.node_count}" in (out / "train-k8s-only.k8s.yaml").read_text()
