"""Which configuration a CDK app builds, from the context the ``cdk`` CLI gives it, read without aws-cdk-lib.

``app.py`` checks the configuration this way before it imports aws-cdk-lib, whose jsii kernel takes about 3 s to start
on the 2-core machine: a bad ``project.yaml`` ends ``cdk synth`` with its message at once. The CDK app itself
(:mod:`stacks.platform_app`) picks the same configuration through its ``App``'s context.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from platform_config.loader import ENV_VAR, exits_on_config_error, load_config
from platform_config.schema import ProjectConfig

#: cdk context key naming the ``project.yaml`` environment (``cdk synth -c env=prod``).
ENV_CONTEXT_KEY = "env"
#: Optional cdk context key with another configuration file (``cdk synth -c config=other.yaml``).
CONFIG_CONTEXT_KEY = "config"
#: How the CLI hands its app the context (aws-cdk-lib's ``cx_api`` ``CONTEXT_ENV`` and
#: ``CONTEXT_OVERFLOW_LOCATION_ENV``): JSON in an environment variable, and what did not fit in it in a JSON file
#: named by another.
CLI_CONTEXT_ENV = "CDK_CONTEXT_JSON"
CLI_CONTEXT_OVERFLOW_ENV = "CONTEXT_OVERFLOW_LOCATION_ENV"

ContextGetter = Callable[[str], Any]


def environment_name(get: ContextGetter) -> str:
    """``-c env=<name>``, else ``$PROJECT_ENV``, else ``default``; ``get`` looks a context key up."""
    return get(ENV_CONTEXT_KEY) or os.environ.get(ENV_VAR) or "default"


def config_from_context(get: ContextGetter) -> ProjectConfig:
    """The configuration the context asks for (``-c config=...``, ``-c env=...``); errors name the bad fields."""
    return load_config(get(CONFIG_CONTEXT_KEY), env=environment_name(get))


def cli_context(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The context the ``cdk`` CLI gave this process (empty outside the CLI)."""
    context: dict[str, Any] = json.loads(environ.get(CLI_CONTEXT_ENV) or "{}")
    overflow = environ.get(CLI_CONTEXT_OVERFLOW_ENV)
    if overflow:
        context.update(json.loads(Path(overflow).read_text()))
    return context


@exits_on_config_error
def check_cli_config() -> None:
    """End the process with ``error: <message>`` (status 1) when the configuration the CLI asks for is invalid."""
    config_from_context(cli_context().get)
