from charts.image import IMAGE_ENV_VAR, IMAGE_PLACEHOLDER, training_image
from tests.unit.charts.conftest import make_cfg


def test_env_var_wins_over_override():
    cfg = make_cfg(image={"uri_override": "example.com/override:1"})
    assert training_image(cfg, {IMAGE_ENV_VAR: "example.com/stack-output:2"}) == "example.com/stack-output:2"
    assert training_image(cfg, {}) == "example.com/override:1"


def test_placeholder_when_nothing_is_known(cfg):
    assert training_image(cfg, {}) == IMAGE_PLACEHOLDER
    assert training_image(cfg, {IMAGE_ENV_VAR: ""}) == IMAGE_PLACEHOLDER
