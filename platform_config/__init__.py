"""The project's single typed configuration, read by the CDK app, the cdk8s app and training."""

from platform_config.instance_types import INSTANCE_TYPES, InstanceType, NetworkInterfaceSpec, instance_type
from platform_config.loader import ConfigError, config_from_dict, exits_on_config_error, load_config, resolved_json
from platform_config.schema import MODE_LAYERS, ModeLayers, ProjectConfig, RecoveryMode

__all__ = [
    "INSTANCE_TYPES",
    "MODE_LAYERS",
    "ConfigError",
    "InstanceType",
    "ModeLayers",
    "NetworkInterfaceSpec",
    "ProjectConfig",
    "RecoveryMode",
    "config_from_dict",
    "exits_on_config_error",
    "instance_type",
    "load_config",
    "resolved_json",
]
