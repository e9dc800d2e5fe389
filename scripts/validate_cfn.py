"""Validate a CDK cloud assembly: cfn-lint on every template and the CDK validation report.

``validate_cdk_out(cdk_out)`` returns error strings (empty = OK); ``python -m scripts.validate_cfn cdk.out``
prints them. cdk-nag itself runs inside ``cdk synth`` (a failing rule aborts synth); its findings and
the CDK's built-in CloudFormation validator land in ``cdk.out/validation-report.json``, checked here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: cfn-lint rules ignored on purpose, each with the reason.
IGNORED_CFN_LINT_RULES: dict[str, str] = {
    "W3010": "Availability zones are hard-coded on purpose: the GPU capacity (ODCR / Capacity Block) exists in "
    "one named AZ (aws.availability_zone), and the new VPC pins its subnets to it without a synth-time lookup.",
    "W3005": "Redundant DependsOn emitted by aws-cdk-lib itself (VPC subnets before the EKS cluster, Lambda roles "
    "before their functions); harmless and outside this project's code.",
}


def lint_template(template: Path) -> tuple[list[str], list[str]]:
    """cfn-lint ``template``: (errors, warnings) as printable lines."""
    from cfnlint.api import ManualArgs, lint_file  # 1.2 CPU-s to import: only where a template is linted

    config = ManualArgs(ignore_checks=list(IGNORED_CFN_LINT_RULES))
    errors, warnings = [], []
    for match in lint_file(template, config=config):
        line = f"{template.name}:{match.linenumber}: {match.rule.id} {match.message}"
        (errors if match.rule.id.startswith("E") else warnings).append(line)
    return errors, warnings


def validation_report_errors(report: Path) -> list[str]:
    """Violations of severity ``error`` in the CDK policy-validation report (cdk-nag, CloudFormation Validate)."""
    if not report.is_file():
        return []
    data = json.loads(report.read_text())
    out = []
    for plugin in data.get("pluginReports", []):
        name = (plugin.get("summary") or {}).get("pluginName", "plugin")
        for violation in plugin.get("violations", []):
            if str(violation.get("severity", "error")).lower() == "error":
                found = violation.get("violatingConstructs") or violation.get("violatingResources") or []
                where = [r.get("constructPath") or r.get("resourceLogicalId") for r in found]
                out.append(f"validation-report.json: {name} {violation.get('ruleName')}: {where}")
    return out


def validate_cdk_out(cdk_out: Path, warnings_out: list[str] | None = None) -> list[str]:
    """Every problem found in ``cdk_out`` (empty = OK). Warnings go to ``warnings_out`` when given."""
    cdk_out = Path(cdk_out)
    templates = sorted(cdk_out.glob("*.template.json"))
    if not templates:
        return [f"{cdk_out}: no *.template.json (run cdk synth first)"]
    errors: list[str] = []
    for template in templates:
        errs, warns = lint_template(template)
        errors += errs
        if warnings_out is not None:
            warnings_out += warns
    errors += validation_report_errors(cdk_out / "validation-report.json")
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cdk_out", nargs="?", default="cdk.out", type=Path)
    args = parser.parse_args(argv)
    warnings: list[str] = []
    errors = validate_cdk_out(args.cdk_out, warnings)
    for w in warnings:
        print(f"warning: {w}")
    for e in errors:
        print(f"error: {e}")
    n = len(list(args.cdk_out.glob("*.template.json")))
    print(f"cfn-lint + validation report: {n} templates, {len(errors)} errors, {len(warnings)} warnings")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
