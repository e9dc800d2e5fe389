"""Control-plane and Container Insights log groups exist before anything writes, with the configured retention."""

from __future__ import annotations

import pytest

from platform_config import ConfigError, config_from_dict
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import resources


def test_log_groups_with_retention_before_the_cluster_and_the_nodes(any_env: Synthesized) -> None:
    tpl = any_env.template_json(any_env.platform.cluster)
    named = {lid: g for lid, g in resources(tpl, "AWS::Logs::LogGroup").items() if "LogGroupName" in g["Properties"]}
    groups = {str(g["Properties"]["LogGroupName"]): (lid, g) for lid, g in named.items()}
    name = any_env.cfg.cluster.name
    wanted = [f"/aws/eks/{name}/cluster"] + [
        f"/aws/containerinsights/{name}/{s}" for s in ("application", "dataplane", "host", "performance")
    ]
    for group in wanted:
        _, g = groups[group]
        assert g["Properties"]["RetentionInDays"] == 30 == any_env.cfg.observability.log_retention_days
        assert g["DeletionPolicy"] == g["UpdateReplacePolicy"] == "Retain"
    cluster = next(iter(resources(tpl, "AWS::EKS::Cluster").values()))
    assert groups[wanted[0]][0] in cluster["DependsOn"]
    nodegroup = next(iter(resources(tpl, "AWS::EKS::Nodegroup").values()))
    assert {groups[g][0] for g in wanted[1:]} <= set(nodegroup["DependsOn"])


def test_retention_must_be_a_cloudwatch_value() -> None:
    assert config_from_dict({"observability": {"log_retention_days": 90}}).observability.log_retention_days == 90
    with pytest.raises(ConfigError, match="CloudWatch Logs accepts 1, 3, 5"):
        config_from_dict({"observability": {"log_retention_days": 31}})
