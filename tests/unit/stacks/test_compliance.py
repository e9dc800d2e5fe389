"""cdk-nag wiring: findings fail synth, every acknowledgement carries a reason."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

from stacks.compliance import acknowledge, add_compliance_checks
from tests.helpers.stack_synth import Synthesized, new_app


def test_unacknowledged_finding_fails_synth(tmp_path: Path) -> None:
    app = new_app(tmp_path)
    stack = cdk.Stack(app, "Nag", env=cdk.Environment(region="us-east-1"))
    iam.Role(
        stack,
        "R",
        assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("ReadOnlyAccess")],
    )
    add_compliance_checks(app)
    with pytest.raises(RuntimeError, match=r"(?s)ValidationFailed.*AwsSolutions-IAM4"):
        app.synth()


def test_acknowledgement_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="needs a reason"):
        acknowledge(cdk.Stack(cdk.App()), "AwsSolutions-IAM4", " ")


def test_platform_synthesizes_with_every_acknowledgement_reasoned(any_env: Synthesized) -> None:
    acks = {}
    for path in any_env.outdir.glob("*.metadata.json"):
        for construct, entries in json.loads(path.read_text()).items():
            for entry in entries:
                if entry["type"] == "aws:cdk:acknowledged-rules":
                    acks.update({f"{construct} {k}": v for k, v in entry["data"].items()})
    nag = {k: v for k, v in acks.items() if "AwsSolutions-" in k}
    assert nag, "expected reasoned cdk-nag acknowledgements"
    assert all(isinstance(v, str) and len(v) > 20 for v in acks.values())
