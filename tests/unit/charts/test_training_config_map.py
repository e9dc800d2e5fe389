import hashlib
import json

from charts.names import CONFIG_KEY, config_map_name, dataset_dir
from charts.training_config_map import TrainingConfigMap
from platform_config import config_from_dict, resolved_json
from tests.unit.charts.conftest import bare_chart


def test_config_map_carries_the_resolved_config_reading_the_prepared_data(cfg):
    chart = bare_chart()
    TrainingConfigMap(chart, "c", cfg)
    (cm,) = chart.to_json()
    assert cm["metadata"]["name"] == config_map_name(cfg)
    shipped = config_from_dict(json.loads(cm["data"][CONFIG_KEY]))
    assert shipped.train.data_dir == dataset_dir(cfg)  # the dataset Job's output
    assert shipped.model_copy(update={"train": cfg.train}) == cfg  # nothing else changes
    assert cm["data"][CONFIG_KEY] == resolved_json(shipped)


def test_each_configuration_gets_a_config_map_of_its_own(cfg):
    """A replacement pod of a running Job must read that Job's settings, not those of a later submit."""
    other = config_from_dict({"checkpoint": {"interval_steps": 7}})
    assert config_map_name(cfg) != config_map_name(other)
    assert config_map_name(cfg) == config_map_name(config_from_dict({}))  # the same settings, the same name
    name = config_map_name(cfg)
    assert name.startswith("fsdp-train-config-") and len(name) == len("fsdp-train-config-") + 10
    chart = bare_chart()
    TrainingConfigMap(chart, "c", cfg)
    (cm,) = chart.to_json()
    assert hashlib.sha256(cm["data"][CONFIG_KEY].encode()).hexdigest()[:10] == name.rsplit("-", 1)[1]
    assert cm["metadata"]["labels"]["training.fsdp/config-hash"] == name.rsplit("-", 1)[1]
