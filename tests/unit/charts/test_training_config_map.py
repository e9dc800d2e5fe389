import json

import cdk8s

from charts.names import CONFIG_KEY, config_map_name
from charts.training_config_map import TrainingConfigMap
from platform_config import config_from_dict, resolved_json


def test_config_map_carries_the_resolved_config(cfg):
    chart = cdk8s.Testing.chart()
    TrainingConfigMap(chart, "c", cfg)
    (cm,) = chart.to_json()
    assert cm["metadata"]["name"] == config_map_name(cfg)
    assert cm["data"][CONFIG_KEY] == resolved_json(cfg)
    assert config_from_dict(json.loads(cm["data"][CONFIG_KEY])) == cfg
