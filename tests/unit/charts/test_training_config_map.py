import json

import cdk8s

from charts.dataset_job import dataset_dir
from charts.names import CONFIG_KEY, config_map_name
from charts.training_config_map import TrainingConfigMap
from platform_config import config_from_dict, resolved_json


def test_config_map_carries_the_resolved_config_reading_the_prepared_data(cfg):
    chart = cdk8s.Testing.chart()
    TrainingConfigMap(chart, "c", cfg)
    (cm,) = chart.to_json()
    assert cm["metadata"]["name"] == config_map_name(cfg)
    shipped = config_from_dict(json.loads(cm["data"][CONFIG_KEY]))
    assert shipped.train.data_dir == dataset_dir(cfg)  # the dataset Job's output
    assert shipped.model_copy(update={"train": cfg.train}) == cfg  # nothing else changes
    assert cm["data"][CONFIG_KEY] == resolved_json(shipped)
