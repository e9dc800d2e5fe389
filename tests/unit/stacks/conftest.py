"""Helpers of the ``stacks/`` unit tests: golden files and resource lookups. The session's syntheses (``default_env``,
``prod_env``, ``any_env``) are fixtures of :mod:`tests.helpers.stack_synth`, shared with the CLI's test."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
#: ``UPDATE_GOLDEN=1 pytest tests/unit/stacks`` rewrites the golden files instead of comparing.
UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN") == "1"
_HASH = re.compile(r"[0-9a-f]{64}")


def normalise(template: dict) -> str:
    """Template JSON with asset hashes (which change with handler and image code) replaced."""
    return _HASH.sub("<ASSET_HASH>", json.dumps(template, indent=1, sort_keys=True)) + "\n"


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/<name>`` (rewrite it with ``UPDATE_GOLDEN=1``)."""
    path = GOLDEN_DIR / name
    if UPDATE_GOLDEN or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if not UPDATE_GOLDEN:
            pytest.fail(f"golden file {path} did not exist; written now, re-run the tests")
    assert text == path.read_text(), f"{name} differs from the golden file (UPDATE_GOLDEN=1 to accept)"


def resources(template: dict, kind: str) -> dict[str, dict]:
    """Resources of CloudFormation type ``kind``, by logical id."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def only(template: dict, kind: str) -> dict:
    """The single resource of type ``kind``."""
    found = list(resources(template, kind).values())
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]
