"""The whole cdk8s app: file names, snapshots (goldens) and strict schema validation of every manifest.

Regenerate the goldens after an intended change: ``UPDATE_GOLDEN=1 python -m pytest tests/unit/charts/test_main.py``.
"""

import os
from pathlib import Path

import pytest
import yaml

from charts.image import IMAGE_ENV_VAR, IMAGE_PLACEHOLDER
from charts.main import (
    CONFIG_CHART,
    DATASET_CHART,
    PREPULL_CHART,
    SERVICE_CHART,
    build_app,
    manifest_file,
    training_chart_id,
)
from platform_config import RecoveryMode, config_from_dict, load_config
from platform_config.versions import SUPPORTED_KUBERNETES_MINORS
from scripts.validate_k8s import validate_manifests

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden" / "charts"
GOLDEN_IMAGE = "111122223333.dkr.ecr.us-east-1.amazonaws.com/fsdp-training:golden"
EXPECTED = sorted(
    manifest_file(c)
    for c in [CONFIG_CHART, SERVICE_CHART, DATASET_CHART, PREPULL_CHART, *map(training_chart_id, RecoveryMode)]
)


def _synth(tmp_path: Path, env: str, environ: dict[str, str]) -> Path:
    out = tmp_path / env
    build_app(load_config(env=env), str(out), environ=environ).synth()
    return out


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("dist")
    return {env: _synth(tmp, env, {IMAGE_ENV_VAR: GOLDEN_IMAGE}) for env in ("default", "prod")}


def test_one_file_per_chart_named_after_the_variant(dists):
    assert sorted(p.name for p in dists["default"].iterdir()) == EXPECTED
    assert "train-inprocess-ft.k8s.yaml" in EXPECTED


@pytest.mark.parametrize("env", ["default", "prod"])
def test_every_manifest_passes_strict_schema_validation(dists, env):
    assert validate_manifests(dists[env], load_config(env=env).cluster.kubernetes_version) == []


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_MINORS)
def test_every_accepted_kubernetes_version_gets_manifests_valid_for_it(tmp_path, minor):
    """The charts of every minor the configuration accepts pass that minor's strict schemas (what ``make synth`` and
    ``make submit`` check), e.g. the training Job's ``backoffLimitPerIndex`` and ``podReplacementPolicy``."""
    cfg = config_from_dict({"cluster": {"kubernetes_version": f"1.{minor}"}})
    out = tmp_path / "dist"
    build_app(cfg, str(out), environ={IMAGE_ENV_VAR: GOLDEN_IMAGE}).synth()
    assert sorted(p.name for p in out.iterdir()) == EXPECTED
    assert validate_manifests(out, f"1.{minor}") == []


@pytest.mark.parametrize("env", ["default", "prod"])
def test_snapshots(dists, env):
    golden = GOLDEN_DIR / env
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.mkdir(parents=True, exist_ok=True)
        for old in golden.glob("*.yaml"):
            old.unlink()
        for path in dists[env].iterdir():
            (golden / path.name).write_text(path.read_text())
    assert sorted(p.name for p in golden.glob("*.yaml")) == EXPECTED, "run with UPDATE_GOLDEN=1 to create goldens"
    for name in EXPECTED:
        assert (dists[env] / name).read_text() == (golden / name).read_text(), f"{env}/{name} changed (UPDATE_GOLDEN=1)"


def test_prod_environment_scales_the_jobs(dists):
    cfg = load_config(env="prod")
    job = next(
        yaml.safe_load_all((dists["prod"] / manifest_file(training_chart_id(RecoveryMode.FT_LAUNCHER))).read_text())
    )
    assert job["spec"]["completions"] == cfg.gpu_nodes.node_count == 8


def test_placeholder_image_when_nothing_is_set(tmp_path):
    out = _synth(tmp_path, "default", {})
    text = (out / manifest_file(training_chart_id(RecoveryMode.K8S_ONLY))).read_text()
    assert IMAGE_PLACEHOLDER in text
