"""The cdk8s app (``cdk8s synth`` runs ``python -m charts.main``): every manifest a run on the cluster needs.

One file per chart in ``dist/``:

* ``training-config.k8s.yaml``  ConfigMap with the resolved config;
* ``training-service.k8s.yaml`` headless Service for pod DNS;
* ``dataset-prep.k8s.yaml``     dataset-preparation Job;
* ``image-prepull.k8s.yaml``    DaemonSet that pulls the training image onto every GPU node (spares included);
* ``train-<mode>.k8s.yaml``     the training Job and its PodDisruptionBudget, one per :class:`RecoveryMode`.

The configuration environment comes from ``$PROJECT_ENV`` (default ``default``); the image from
``$TRAINING_IMAGE_URI``, ``image.uri_override`` or a placeholder (see :mod:`charts.image`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

import cdk8s

from charts.dataset_job import DatasetJob
from charts.disruption_budget import TrainingDisruptionBudget
from charts.headless_service import HeadlessService
from charts.image import training_image
from charts.image_prepull import ImagePrepull
from charts.topology import Topology
from charts.training_config_map import TrainingConfigMap
from charts.training_job import TrainingJob
from platform_config import ProjectConfig, RecoveryMode, exits_on_config_error, load_config
from training.resilience import startup_budget

OUTPUT_EXTENSION = ".k8s.yaml"
CONFIG_CHART = "training-config"
SERVICE_CHART = "training-service"
DATASET_CHART = "dataset-prep"
PREPULL_CHART = "image-prepull"


def training_chart_id(mode: RecoveryMode) -> str:
    return f"train-{mode.value}"


def manifest_file(chart_id: str) -> str:
    """The file ``cdk8s synth`` writes for ``chart_id`` (relative to the output directory)."""
    return f"{chart_id}{OUTPUT_EXTENSION}"


def build_app(
    cfg: ProjectConfig,
    outdir: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    topology: Topology | None = None,
    fit_timeouts: bool = True,
) -> cdk8s.App:
    """All charts for ``cfg``; ``outdir`` defaults to ``$CDK8S_OUTDIR`` (``cdk8s synth -o``) or ``dist``. Timeouts
    that a new worker of the model's size would outlast are raised first, each with a line on stderr
    (:func:`training.resilience.startup_budget.fit_cluster_timeouts`), unless ``fit_timeouts`` is off (the local
    cluster, whose config is fitted to its own device already)."""
    if fit_timeouts:
        cfg, raised = startup_budget.fit_cluster_timeouts(cfg)
        for line in raised:
            print(f"[budget] {line}", file=sys.stderr, flush=True)
    app = cdk8s.App(
        outdir=outdir or os.environ.get("CDK8S_OUTDIR") or "dist",
        output_file_extension=OUTPUT_EXTENSION,
        yaml_output_type=cdk8s.YamlOutputType.FILE_PER_CHART,
    )
    image = training_image(cfg, environ)
    TrainingConfigMap(cdk8s.Chart(app, CONFIG_CHART, disable_resource_name_hashes=True), "ConfigMap", cfg)
    HeadlessService(cdk8s.Chart(app, SERVICE_CHART, disable_resource_name_hashes=True), "Service", cfg)
    DatasetJob(cdk8s.Chart(app, DATASET_CHART, disable_resource_name_hashes=True), "Job", cfg, image=image)
    ImagePrepull(cdk8s.Chart(app, PREPULL_CHART, disable_resource_name_hashes=True), "DaemonSet", cfg, image=image)
    for mode in RecoveryMode:
        chart = cdk8s.Chart(app, training_chart_id(mode), disable_resource_name_hashes=True)
        TrainingJob(chart, "Job", cfg, mode, image=image, topology=topology)
        TrainingDisruptionBudget(chart, "DisruptionBudget", cfg, mode)
    return app


@exits_on_config_error
def main() -> None:
    build_app(load_config()).synth()


if __name__ == "__main__":
    main()
