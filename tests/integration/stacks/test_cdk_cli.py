"""The real ``cdk`` CLI: offline ``cdk synth --no-lookups`` for both environments, validated, and the same as the
session's in-process synthesis (:mod:`tests.helpers.stack_synth`)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scripts.validate_cfn import validation_report_errors
from tests.helpers.stack_synth import NOW, Synthesized

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


#: Resource metadata the CLI asks aws-cdk-lib for (context ``aws:cdk:enable-path-metadata`` and
#: ``aws:cdk:enable-asset-metadata``) and an in-process App does not: the construct path and the asset's location.
CLI_METADATA = ("aws:cdk:path", "aws:asset:")


def without_cli_metadata(template: dict) -> dict:
    """``template`` without :data:`CLI_METADATA` (a resource left with no metadata loses the key)."""
    for resource in template.get("Resources", {}).values():
        metadata = {k: v for k, v in resource.get("Metadata", {}).items() if not k.startswith(CLI_METADATA)}
        resource.pop("Metadata", None)
        if metadata:
            resource["Metadata"] = metadata
    return template


def assets(out: Path) -> dict[str, str]:
    """The digest of every file of the assembly's assets (``asset.*``, files and folders), by path."""
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.glob("asset.*/**/*")) + sorted(out.glob("asset.*"))
        if p.is_file()
    }


def test_offline_synth_of_both_environments_is_valid_and_equals_the_in_process_synthesis(
    tmp_path: Path, default_env: Synthesized, prod_env: Synthesized
) -> None:
    """default and prod (existing VPC, Capacity Block) through the CLI: each is the in-process synthesis of the
    session (another process, another jsii kernel) byte for byte: every template, apart from the metadata only the
    CLI asks for, and every asset file; so each passes cfn-lint as that synthesis does (tests/unit/stacks), and its
    own validation report holds no error.

    prod plans its Capacity Block actions at a fixed ``now`` (before the block, the session's), so the run does not
    follow the clock.
    """
    runs = {"default": (default_env, ["env=default"]), "prod": (prod_env, ["env=prod", f"now={NOW}"])}
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:  # separate output dirs: independent CLI processes
        results = dict(
            zip(runs, pool.map(lambda item: synth(tmp_path / item[0], *item[1][1]), runs.items()), strict=True)
        )
    for name, (in_process, _) in runs.items():
        out = tmp_path / name
        assert results[name].returncode == 0, results[name].stdout + results[name].stderr
        assert "reserved context key" not in results[name].stderr, results[name].stderr  # no aws: key in cdk.json
        # cfn-lint: every template below equals the in-process synthesis's, which test_validate_cfn lints (a second
        # lint of the same templates cost ~4 CPU-s an environment); the CLI run's own validation report is read here
        assert validation_report_errors(out / "validation-report.json") == [], name
        templates = sorted(p.name for p in out.glob("*.template.json"))
        assert templates == [
            "fsdp-resilience-cluster.template.json",
            "fsdp-resilience-gpu.template.json",
            "fsdp-resilience-image.template.json",
            "fsdp-resilience-storage.template.json",
        ]
        for template in templates:
            cli = without_cli_metadata(json.loads((out / template).read_text()))
            assert cli == json.loads((in_process.outdir / template).read_text()), f"{name}: {template}"
        assert assets(out) and assets(out) == assets(in_process.outdir), name


def test_bad_config_fails_synth_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "project.yaml"
    cfg.write_text(
        (REPO / "project.yaml").read_text().replace('kubernetes_version: "1.36"', 'kubernetes_version: "1.27"')
    )
    result = synth(tmp_path / "out", "env=default", f"config={cfg}")
    assert result.returncode != 0
    assert "error: invalid configuration" in result.stderr and "cluster.kubernetes_version" in result.stderr
    assert "Traceback" not in result.stderr, result.stderr  # the message, not a stack
