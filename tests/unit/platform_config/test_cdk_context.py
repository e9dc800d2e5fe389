"""The configuration a CDK app builds, from the ``cdk`` CLI's context, read before aws-cdk-lib is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from platform_config.cdk_context import (
    CLI_CONTEXT_ENV,
    CLI_CONTEXT_OVERFLOW_ENV,
    check_cli_config,
    cli_context,
    config_from_context,
    environment_name,
)

REPO = Path(__file__).resolve().parents[3]


def test_the_cli_context_is_its_variable_and_its_overflow_file(tmp_path: Path) -> None:
    overflow = tmp_path / "context-overflow.json"
    overflow.write_text(json.dumps({"config": "other.yaml"}))
    environ = {CLI_CONTEXT_ENV: json.dumps({"env": "prod"}), CLI_CONTEXT_OVERFLOW_ENV: str(overflow)}
    assert cli_context(environ) == {"env": "prod", "config": "other.yaml"}
    assert cli_context({CLI_CONTEXT_ENV: '{"env": "prod"}'}) == {"env": "prod"}
    assert cli_context({}) == {}  # outside the CLI


def test_the_context_s_environment_wins_over_project_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROJECT_ENV", raising=False)
    assert environment_name({}.get) == "default"
    monkeypatch.setenv("PROJECT_ENV", "prod")
    assert environment_name({}.get) == "prod"
    assert environment_name({"env": "default"}.get) == "default"
    assert config_from_context({"env": "prod"}.get).aws.region == "us-west-2"  # project.yaml's prod
    assert config_from_context({"env": "default"}.get).aws.region == "us-east-1"


def test_a_bad_configuration_ends_the_check_with_its_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bad = tmp_path / "project.yaml"
    text = (REPO / "project.yaml").read_text()
    bad.write_text(text.replace('kubernetes_version: "1.36"', 'kubernetes_version: "1.27"'))
    monkeypatch.setenv(CLI_CONTEXT_ENV, json.dumps({"config": str(bad)}))
    with pytest.raises(SystemExit) as exit_:
        check_cli_config()
    assert str(exit_.value).startswith("error: ") and "cluster.kubernetes_version" in str(exit_.value)


def test_the_app_refuses_a_bad_configuration_before_it_imports_aws_cdk_lib(tmp_path: Path) -> None:
    """``python app.py`` as the CLI runs it: the message, status 1, and aws-cdk-lib (its jsii kernel) never loaded."""
    env = {**os.environ, CLI_CONTEXT_ENV: json.dumps({"config": str(tmp_path / "missing.yaml")})}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "app.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert f"error: configuration file {tmp_path / 'missing.yaml'} does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "platform_config.cdk_context" in imported and "aws_cdk" not in imported
