"""A demo environment synthesizes but cannot be deployed; a deploy environment carries no guard."""

from __future__ import annotations

from stacks.deploy_guard import MESSAGE, PARAMETER_ID, RULE_ID
from tests.helpers.stack_synth import Synthesized


def test_demo_stacks_refuse_deployment(default_env: Synthesized) -> None:
    assert default_env.cfg.environment_kind == "demo"
    for stack in default_env.platform.stacks:
        tpl = default_env.template_json(stack)
        assert tpl["Parameters"][PARAMETER_ID] == {
            "Type": "String",
            "Default": "demo",
            "AllowedValues": ["demo"],
            "Description": "environment_kind of the project.yaml environment this stack was synthesized from",
        }
        # the only allowed value is "demo", and the rule requires anything else: CloudFormation refuses the stack
        assert tpl["Rules"][RULE_ID] == {
            "Assertions": [
                {"Assert": {"Fn::Not": [{"Fn::Equals": [{"Ref": PARAMETER_ID}, "demo"]}]}, "AssertDescription": MESSAGE}
            ]
        }


def test_deploy_stacks_carry_no_guard(prod_env: Synthesized) -> None:
    assert prod_env.cfg.environment_kind == "deploy"
    for stack in prod_env.platform.stacks:
        tpl = prod_env.template_json(stack)
        assert RULE_ID not in tpl.get("Rules", {}) and PARAMETER_ID not in tpl.get("Parameters", {})
