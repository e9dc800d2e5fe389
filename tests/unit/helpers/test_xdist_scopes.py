"""The suite's xdist scopes: whole files, except the folders that share session fixtures."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.xdist_scopes import SHARED_SESSION_FIXTURES, scope_of

REPO = Path(__file__).resolve().parents[3]


def test_files_of_a_shared_folder_are_one_unit_and_other_files_are_their_own() -> None:
    assert scope_of("tests/unit/stacks/test_cluster.py::test_x[default]") == "stacks"
    assert scope_of("tests/unit/stacks/test_gpu_stack.py::TestGpu::test_y") == "stacks"
    assert scope_of("tests/integration/stacks/test_cdk_cli.py::test_z") == "stacks"  # compares with their synthesis
    assert scope_of("tests/unit/charts/test_main.py::test_z") == "tests/unit/charts/test_main.py"
    # a sibling folder whose name starts the same is not the shared one
    assert scope_of("tests/unit/stacks_extra/test_a.py::test_b") == "tests/unit/stacks_extra/test_a.py"


def test_every_shared_folder_uses_the_session_syntheses() -> None:
    for folder in SHARED_SESSION_FIXTURES:
        texts = [p.read_text() for p in (REPO / folder).glob("test_*.py")]
        assert texts and any(re.search(r"\b(default|prod|any)_env\b", t) for t in texts), folder
