"""Loading project.yaml: environments, deep merge, clear file errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from platform_config import ConfigError, exits_on_config_error, load_config, resolved_json
from platform_config.loader import DEFAULT_CONFIG_PATH, deep_merge


def test_shipped_project_yaml_loads_in_every_environment() -> None:
    import yaml

    envs = ["default", *yaml.safe_load(DEFAULT_CONFIG_PATH.read_text()).get("environments", {})]
    assert "prod" in envs
    for env in envs:
        load_config(env=env)


def test_environment_overrides_deep_merge(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "cluster: {name: base, endpoint_access: public}\nenvironments:\n  dev:\n    cluster: {name: dev-cluster}\n"
    )
    assert load_config(path).cluster.name == "base"
    dev = load_config(path, env="dev")
    assert dev.cluster.name == "dev-cluster"
    assert dev.cluster.endpoint_access == "public"  # untouched sibling kept


def test_env_var_selects_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("environments:\n  x:\n    train: {steps: 7}\n")
    monkeypatch.setenv("PROJECT_ENV", "x")
    assert load_config(path).train.steps == 7


def test_unknown_environment_lists_allowed(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("environments:\n  dev: {}\n")
    with pytest.raises(ConfigError, match=r"environment 'prod' is not defined; allowed: default, dev"):
        load_config(path, env="prod")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("a: [", "not valid YAML"), ("- 1\n- 2\n", "mapping at the top level")],
)
def test_malformed_files(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        load_config(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_resolved_json_round_trips(tmp_path: Path) -> None:
    cfg = load_config(env="prod")
    path = tmp_path / "config.json"
    path.write_text(resolved_json(cfg))
    assert load_config(path) == cfg
    assert json.loads(path.read_text())["job"]["mode"] == cfg.job.mode.value


def test_deep_merge_does_not_mutate_inputs() -> None:
    base = {"a": {"b": 1, "c": [1]}}
    merged = deep_merge(base, {"a": {"b": 2}})
    assert merged == {"a": {"b": 2, "c": [1]}}
    assert base == {"a": {"b": 1, "c": [1]}}


def test_cross_field_errors_name_their_fields_without_a_root_marker(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("environment_kind: deploy\ncluster: {endpoint_access: private}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    lines = str(err.value).splitlines()
    assert lines[0] == f"invalid configuration ({path}, environment 'default'):"
    assert lines[1].startswith("  - cluster.admin_principal_arn is required with environment_kind 'deploy'")
    assert "<root>" not in str(err.value)


def test_a_command_ends_a_config_error_with_its_message_and_status_1(tmp_path: Path) -> None:
    """``exits_on_config_error``: what ``python -m training.local`` (and every command that loads the config) prints
    for a bad file, in a real process: the message naming the field, no traceback; other errors are not swallowed."""
    import subprocess
    import sys

    bad = tmp_path / "project.yaml"
    bad.write_text(DEFAULT_CONFIG_PATH.read_text().replace('kubernetes_version: "1.36"', 'kubernetes_version: "1.27"'))
    cmd = [sys.executable, "-m", "training.local", "--run-dir", str(tmp_path / "run"), "--config", str(bad)]
    proc = subprocess.run(cmd, cwd=DEFAULT_CONFIG_PATH.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: invalid configuration ({bad}, environment 'default'):\n")
    assert "  - cluster.kubernetes_version: must be one of 1.32 .. 1.36" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()

    @exits_on_config_error
    def other() -> None:
        raise ValueError("not a configuration error")

    with pytest.raises(ValueError, match="not a configuration error"):
        other()
