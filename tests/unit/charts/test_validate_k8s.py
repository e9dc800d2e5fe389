"""scripts/validate_k8s.py catches what it promises to catch."""

from pathlib import Path

import yaml

from scripts.validate_k8s import main, validate_manifests

GOOD = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": {"k": "v"}}


def _write(tmp_path: Path, *docs, name="m.k8s.yaml") -> Path:
    (tmp_path / name).write_text(yaml.safe_dump_all(list(docs)))
    return tmp_path


def test_valid_manifest_passes(tmp_path):
    assert validate_manifests(_write(tmp_path, GOOD, GOOD), "1.36") == []


def test_unknown_field_fails_in_strict_mode(tmp_path):
    bad = {**GOOD, "data": {"k": "v"}, "spec": {"x": 1}}
    (err,) = validate_manifests(_write(tmp_path, GOOD, bad), "1.36")
    assert "m.k8s.yaml[1] ConfigMap/c" in err


def test_wrong_type_fails(tmp_path):
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"completions": "two", "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    (err,) = validate_manifests(_write(tmp_path, job), "1.36")
    assert "spec.completions" in err


def test_resolver_error_text_and_tokens_fail(tmp_path):
    cm = {**GOOD, "data": {"fs": "Command failed: aws cloudformation describe-stacks", "t": "${Token[TOKEN.12]}"}}
    errors = validate_manifests(_write(tmp_path, cm), "1.36")
    assert len(errors) == 2 and all("resolver error" in e for e in errors)


def test_empty_dir_and_non_objects_fail(tmp_path):
    assert validate_manifests(tmp_path, "1.36") == ["no manifests (*.yaml) in " + str(tmp_path)]
    (tmp_path / "x.yaml").write_text("- 1\n")
    assert "not a Kubernetes object" in validate_manifests(tmp_path, "1.36")[0]


def test_unsupported_version_is_an_error(tmp_path):
    (err,) = validate_manifests(_write(tmp_path, GOOD), "1.99")
    assert "1.99" in err


def test_cli_exit_code(tmp_path, capsys):
    assert main(["--dist", str(_write(tmp_path, GOOD))]) == 0
    assert main(["--dist", str(tmp_path / "missing")]) == 1
    assert "FAIL" in capsys.readouterr().out
