"""Shared fixtures of the chart tests: configs and synthesized manifests (real cdk8s, no mocks)."""

from __future__ import annotations

import cdk8s
import pytest

from charts.topology import Topology
from charts.training_job import TrainingJob
from platform_config import ProjectConfig, RecoveryMode, config_from_dict, load_config

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/fsdp-training:test"


@pytest.fixture
def cfg() -> ProjectConfig:
    """The committed project.yaml, default environment."""
    return load_config(env="default")


def make_cfg(**sections) -> ProjectConfig:
    """A config from section overrides, e.g. ``make_cfg(gpu_nodes={"node_count": 4, "max_nodes": 4})``."""
    return config_from_dict(sections)


def bare_chart() -> cdk8s.Chart:
    """A chart of an app that is never synthesized to disk (``to_json`` only). ``cdk8s.Testing.chart()`` makes a
    ``cdk8s.outdir.*`` directory in /tmp for each chart and leaves it there."""
    return cdk8s.Chart(cdk8s.App(outdir="dist"), "test")


def synth_job(cfg: ProjectConfig, mode: RecoveryMode, topology: Topology | None = None) -> dict:
    """The training Job manifest of ``mode`` as a dict."""
    chart = bare_chart()
    TrainingJob(chart, "Job", cfg, mode, image=IMAGE, topology=topology)
    (job,) = chart.to_json()
    return job


def trainer(job: dict) -> dict:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container
