"""scripts/validate_cfn.py: cfn-lint on every template plus the CDK validation report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from scripts.validate_cfn import IGNORED_CFN_LINT_RULES, validate_cdk_out, validation_report_errors
from tests.helpers.stack_synth import Synthesized


def test_synthesized_templates_are_clean(any_env: Synthesized) -> None:
    warnings: list[str] = []
    assert validate_cdk_out(any_env.outdir, warnings) == []
    assert warnings == []


def test_every_ignored_rule_has_a_reason() -> None:
    assert all(len(reason) > 30 for reason in IGNORED_CFN_LINT_RULES.values())


def test_broken_template_is_reported(tmp_path: Path) -> None:
    bad = {"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"NoSuchProperty": 1}}}}
    (tmp_path / "x.template.json").write_text(json.dumps(bad))
    errors = validate_cdk_out(tmp_path)
    assert len(errors) == 1 and "E3002" in errors[0]


def test_empty_dir_is_an_error(tmp_path: Path) -> None:
    assert "no *.template.json" in validate_cdk_out(tmp_path)[0]


def test_validation_report_errors(tmp_path: Path, default_env: Synthesized) -> None:
    report = tmp_path / "validation-report.json"
    assert validation_report_errors(report) == []  # absent = nothing to report
    shutil.copy(default_env.outdir / "validation-report.json", report)
    assert validation_report_errors(report) == []
    report.write_text(
        json.dumps(
            {
                "pluginReports": [
                    {
                        "summary": {"pluginName": "cdk-nag"},
                        "violations": [
                            {
                                "ruleName": "AwsSolutions-S1",
                                "severity": "error",
                                "violatingConstructs": [{"constructPath": "S/B"}],
                            }
                        ],
                    }
                ]
            }
        )
    )
    (err,) = validation_report_errors(report)
    assert "AwsSolutions-S1" in err and "S/B" in err
