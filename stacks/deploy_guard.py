"""A CloudFormation rule that keeps an ``environment_kind: demo`` configuration from being deployed.

The committed top level of ``project.yaml`` is an offline demo: a documentation CIDR on the public endpoint and no
admin access entry, which would give a cluster that nobody can use. It must still synthesize and validate offline
(``make demo``, the tests), so instead of failing synth, every stack of a demo environment carries a parameter
``EnvironmentKind`` whose only allowed value is ``demo`` and a template ``Rules`` assertion that it is not ``demo``:
``cdk deploy`` fails before CloudFormation creates anything, with the message below. ``environment_kind: deploy``
stacks carry neither.
"""

from __future__ import annotations

from aws_cdk import CfnParameter, CfnRule, CfnRuleAssertion, Fn, Stack

from platform_config import ProjectConfig

RULE_ID = "RefuseDemoEnvironment"
PARAMETER_ID = "EnvironmentKind"
MESSAGE = (
    "This stack was synthesized from a configuration with environment_kind 'demo' (placeholder access settings: a "
    "documentation CIDR, no cluster.admin_principal_arn). Deploy an environment with environment_kind: deploy "
    "(docs/deploy.md)."
)


def refuse_demo_deploy(stack: Stack, cfg: ProjectConfig) -> CfnRule | None:
    """Add the parameter and the rule to ``stack`` when ``cfg`` is a demo; return the rule (None for ``deploy``)."""
    if cfg.environment_kind != "demo":
        return None
    kind = CfnParameter(
        stack,
        PARAMETER_ID,
        type="String",
        default="demo",
        allowed_values=["demo"],
        description="environment_kind of the project.yaml environment this stack was synthesized from",
    )
    return CfnRule(
        stack,
        RULE_ID,
        assertions=[
            CfnRuleAssertion(
                assert_=Fn.condition_not(Fn.condition_equals(kind.value_as_string, "demo")),
                assert_description=MESSAGE,
            )
        ],
    )
