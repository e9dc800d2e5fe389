"""The suite's xdist scopes: whole files, except the folders that share session fixtures."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.xdist_scopes import SHARED_SESSION_FIXTURES, scope_of

REPO = Path(__file__).resolve().parents[3]


def test_files_of_a_shared_folder_are_one_unit_and_other_files_are_their_own() -> None:
    assert scope_of("tests/unit/stacks/test_cluster.py::test_x[default]") == "tests/unit/stacks/"
    assert scope_of("tests/unit/stacks/test_gpu_stack.py::TestGpu::test_y") == "tests/unit/stacks/"
    assert scope_of("tests/unit/charts/test_main.py::test_z") == "tests/unit/charts/test_main.py"
    # a sibling folder whose name starts the same is not the shared one
    assert scope_of("tests/unit/stacks_extra/test_a.py::test_b") == "tests/unit/stacks_extra/test_a.py"


def test_every_shared_folder_exists_and_holds_the_session_fixtures() -> None:
    for folder in SHARED_SESSION_FIXTURES:
        assert 'scope="session"' in (REPO / folder / "conftest.py").read_text(), folder
