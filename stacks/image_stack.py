"""``<name>-image``: the training image, rebuilt on every code change without touching the cluster."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from platform_config import ProjectConfig
from stacks.training_image import TrainingImage, TrainingImageProps


def image_uri_parameter_name(cfg: ProjectConfig) -> str:
    """SSM parameter that also holds the image URI (for tools that read SSM instead of stack outputs)."""
    return f"/{cfg.cluster.name}/training-image-uri"


class TrainingImageStack(Stack):
    """The image asset. Outputs ``TrainingImageUri`` (read by ``make submit`` for the charts)."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: ProjectConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.image = TrainingImage(self, "TrainingImage", TrainingImageProps(cfg=cfg))
        # A stack needs at least one resource; the parameter also publishes the URI outside CloudFormation.
        ssm.StringParameter(
            self,
            "ImageUriParameter",
            parameter_name=image_uri_parameter_name(cfg),
            string_value=self.image.image_uri,
            description="URI of the training image",
        )
        CfnOutput(self, "TrainingImageUri", value=self.image.image_uri, description="Training container image URI")
