"""cdk-nag wiring: the AwsSolutions pack as a synth-time validation plugin, and reasoned acknowledgements.

A finding without an acknowledgement fails ``cdk synth``. Every acknowledgement names one rule (or one
finding of a rule, ``Rule[Finding]``) on the narrowest construct that owns it, with the reason.
"""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def add_compliance_checks(app: cdk.App) -> None:
    """Run the AwsSolutions rules on every stack of ``app`` at synth."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge ``rule`` (``AwsSolutions-XX`` or ``AwsSolutions-XX[finding]``) on ``scope`` and below."""
    if not reason.strip():
        raise ValueError(f"acknowledgement of {rule} needs a reason")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))


def managed_policy_finding(policy_name: str) -> str:
    """The IAM4 finding id of an AWS-managed policy."""
    return f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy_name}]"
