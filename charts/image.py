"""Which container image the training and dataset pods run."""

from __future__ import annotations

import os
from collections.abc import Mapping

from platform_config import ProjectConfig

#: Environment variable ``make submit`` fills from the CDK stack output ``TrainingImageUri``.
IMAGE_ENV_VAR = "TRAINING_IMAGE_URI"
#: Written when no image is known; ``scripts/submit.sh`` refuses to apply a manifest that contains it.
IMAGE_PLACEHOLDER = "image-not-set.invalid/set-training-image-uri:placeholder"


def training_image(cfg: ProjectConfig, environ: Mapping[str, str] | None = None) -> str:
    """``$TRAINING_IMAGE_URI`` if set, else ``image.uri_override``, else :data:`IMAGE_PLACEHOLDER`."""
    env = os.environ if environ is None else environ
    return env.get(IMAGE_ENV_VAR) or cfg.image.uri_override or IMAGE_PLACEHOLDER
