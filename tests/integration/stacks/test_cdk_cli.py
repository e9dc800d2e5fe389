"""The real ``cdk`` CLI: offline ``cdk synth --no-lookups`` for both environments, byte-identical, validated."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scripts.validate_cfn import validate_cdk_out

REPO = Path(__file__).resolve().parents[3]
CDK = REPO / "node_modules" / ".bin" / "cdk"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not CDK.exists(), reason="node_modules/.bin/cdk missing (run make setup)"),
]


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        PATH=f"{REPO / '.venv' / 'bin'}:{REPO / 'node_modules' / '.bin'}:{env.get('PATH', '')}",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        CDK_DISABLE_CLI_TELEMETRY="true",
        CDK_DISABLE_VERSION_CHECK="true",
        AWS_EC2_METADATA_DISABLED="true",  # no credentials: skip the SDK's IMDS probing (15 s otherwise)
        AWS_CONFIG_FILE="/nonexistent",
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
    )
    return env


def synth(out: Path, *context: str) -> subprocess.CompletedProcess:
    args = [str(CDK), "synth", "--no-lookups", "--quiet", "--output", str(out)]
    for c in context:
        args += ["-c", c]
    return subprocess.run(args, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=240)


#: Timing data, not part of the assembly: the CLI asks aws-cdk-lib for it (CDK_PERF_COUNTERS_FILE), and aws-cdk-lib
#: writes it only when a synthesis is slow (seen at 34 s on a loaded 2-core machine), so it comes and goes.
PERF_COUNTERS = "performance-counters.json"


def digest(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != PERF_COUNTERS
    }


def test_offline_synth_of_both_environments_is_valid_and_repeatable(tmp_path: Path) -> None:
    """default twice (byte-identical cdk.out), prod (existing VPC, Capacity Block) once; both pass the validators.

    prod plans its Capacity Block actions at a fixed ``now`` (before the block), so the run does not follow the clock.
    """
    runs = {
        "default-1": ["env=default"],
        "default-2": ["env=default"],
        "prod": ["env=prod", "now=2026-12-01T00:00:00Z"],
    }
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:  # separate output dirs: independent CLI processes
        results = dict(zip(runs, pool.map(lambda item: synth(tmp_path / item[0], *item[1]), runs.items()), strict=True))
    for result in results.values():
        assert result.returncode == 0, result.stdout + result.stderr
    for name in ("default-1", "prod"):
        assert validate_cdk_out(tmp_path / name) == [], name
        assert sorted(p.name for p in (tmp_path / name).glob("*.template.json")) == [
            "fsdp-resilience-cluster.template.json",
            "fsdp-resilience-gpu.template.json",
            "fsdp-resilience-image.template.json",
            "fsdp-resilience-storage.template.json",
        ]
    assert digest(tmp_path / "default-1") == digest(tmp_path / "default-2")
    shutil.rmtree(tmp_path / "default-2")


def test_bad_config_fails_synth_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "project.yaml"
    cfg.write_text(
        (REPO / "project.yaml").read_text().replace('kubernetes_version: "1.36"', 'kubernetes_version: "1.27"')
    )
    result = synth(tmp_path / "out", "env=default", f"config={cfg}")
    assert result.returncode != 0
    assert "cluster.kubernetes_version" in result.stdout + result.stderr
