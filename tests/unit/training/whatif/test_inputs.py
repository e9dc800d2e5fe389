"""Scenario sources: project.yaml environments, YAML scenario files, and the flag strings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from platform_config import config_from_dict, load_config
from platform_config.schema import LLAMA3_NODE_MTBF_HOURS
from training.whatif.inputs import (
    apply_mapping,
    from_config,
    load_mapping,
    parse_by_nodes,
    parse_dist,
    parse_layer_values,
    parse_schedule,
)
from training.whatif.params import Dist, Scenario, ScenarioError

REPO = Path(__file__).resolve().parents[4]


def test_the_prod_environment_sets_the_cluster() -> None:
    sc = from_config(load_config(REPO / "project.yaml", env="prod"))
    assert (sc.nodes, sc.gpus_per_node, sc.steps, sc.interval) == (8, 8, 5000, 500)  # p5.48xlarge: 8 GPUs
    assert (sc.mode, sc.fsx_capacity_gib) == ("inprocess-ft", 4800)
    assert sc.node_mtbf_hours == LLAMA3_NODE_MTBF_HOURS  # observability.node_mtbf_hours' default
    assert sc.layers["job"].budget == 3 and sc.layers["ft_launcher"].budget == 5  # backoff_limit, max_restarts


def test_the_configured_node_mtbf_is_the_scenarios() -> None:
    cfg = config_from_dict({"observability": {"node_mtbf_hours": 8.0}, "gpu_nodes": {"node_count": 4, "max_nodes": 4}})
    sc = from_config(cfg)
    assert sc.node_mtbf_hours == 8.0
    derived = dataclasses.replace(sc, step_s=1.0).validate().to_json()["derived"]
    assert derived["cluster_mtbf_hours"] == pytest.approx(2.0)  # 4 nodes: the job fails every 2 h


def test_a_scenario_file(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "steps: 2000\nstep_s: 0.5\nrestore_s: {p50: 60, p95: 90}\nstep_s_by_nodes: {8: 0.45, 64: 0.5}\n"
        "layers:\n  inprocess: {restart: 4, budget: 2}\n"
        "fault_classes:\n  - {name: exception, share: 1.0, detection_s: {inprocess: 0}}\n"
        "fault_schedule: [exception@62, {step: 574, class: exception}]\n"
    )
    base = Scenario()
    sc = apply_mapping(base, load_mapping(f), "s.yaml").validate()
    assert (sc.steps, sc.step_s, sc.restore_s) == (2000, 0.5, Dist(60.0, 90.0))
    assert sc.step_s_by_nodes == {8: 0.45, 64: 0.5}
    assert sc.layers["inprocess"].restart == Dist(4.0) and sc.layers["inprocess"].budget == 2
    assert sc.layers["job"] == base.layers["job"]  # layers merge: the others keep theirs
    assert [c.name for c in sc.fault_classes] == ["exception"]
    assert sc.fault_schedule == ((62, "exception"), (574, "exception"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"stepz": 1}, "s.yaml: unknown key\\(s\\) stepz; allowed: bytes_per_param, checkpoint_gb"),
        ({"layers": {"kubelet": {}}}, "s.yaml: layers: expected a mapping with keys among inprocess"),
        ({"layers": {"job": {"retries": 1}}}, "s.yaml: layers.job: expected keys among budget, fail_p, restart"),
        ({"fault_classes": [{"name": "x"}]}, "s.yaml: fault_classes: each class needs name and detection_s"),
        ({"fault_classes": [{"name": "x", "detection_s": {"job": 0}, "colour": 1}]}, "unknown key\\(s\\) colour"),
        ({"fault_schedule": ["exception"]}, "s.yaml: fault_schedule: expected CLASS@STEP"),
        ({"restore_s": {"p50": 5, "p95": 1}}, "s.yaml: restore_s: p95 must be >= p50"),
    ],
)
def test_scenario_file_errors_name_the_file_and_key(data: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        apply_mapping(Scenario(), data, "s.yaml")


def test_a_missing_or_broken_scenario_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"--scenario: .* does not exist"):
        load_mapping(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("- a list\n")
    with pytest.raises(ScenarioError, match="must hold a mapping"):
        load_mapping(tmp_path / "bad.yaml")


def test_flag_strings() -> None:
    assert parse_dist("10", "--restore-s") == Dist(10.0)
    assert parse_dist("10,15", "--restore-s") == Dist(10.0, 15.0)
    assert parse_by_nodes("2:0.45,8:0.5") == {2: 0.45, 8: 0.5}
    assert parse_schedule("exception@62, hang@574") == ((62, "exception"), (574, "hang"))
    assert parse_layer_values(["job=270,400", "inprocess=3"], "--restart-s") == {"job": "270,400", "inprocess": "3"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parse_dist("10,5", "--restore-s"), "--restore-s: expected P50 or P50,P95"),
        (lambda: parse_dist("1,2,3", "--restore-s"), "--restore-s: expected P50 or P50,P95"),
        (lambda: parse_by_nodes("two:0.4"), "--step-s-by-nodes: expected NODES:SECONDS"),
        (lambda: parse_by_nodes("0:0.4"), "node counts must be >= 1"),
        (lambda: parse_schedule("hang@soon"), "--faults: the step of 'hang@soon' is not a whole number"),
        (lambda: parse_layer_values(["kubelet=3"], "--budget"), "--budget: expected LAYER=VALUE with LAYER one of"),
    ],
)
def test_flag_string_errors_name_the_flag(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScenarioError, match=message):
        call()
