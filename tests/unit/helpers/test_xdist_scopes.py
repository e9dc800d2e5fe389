"""The suite's xdist scopes: whole files, except the folders that share session fixtures."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.xdist_scopes import (
    SHARED_SESSION_FIXTURES,
    WAITING_FILES,
    is_waiting_worker,
    next_scope,
    scope_of,
)

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


QUEUE = [
    "stacks",
    "tests/integration/training/test_cluster_modes.py",
    "tests/integration/training/test_slow_storage.py",
    "tests/unit/charts/test_main.py",
    "tests/unit/training/resilience/test_hang.py",
]


def test_with_three_workers_the_last_takes_the_waiting_files_first_and_the_others_the_rest() -> None:
    assert [is_waiting_worker(w, 3) for w in ("gw0", "gw1", "gw2")] == [False, False, True]
    assert next_scope(QUEUE, "gw2", 3) == "tests/integration/training/test_slow_storage.py"
    assert next_scope(QUEUE[3:], "gw2", 3) == "tests/unit/training/resilience/test_hang.py"
    assert next_scope(QUEUE[1:], "gw0", 3) == "tests/integration/training/test_cluster_modes.py"
    assert next_scope(QUEUE[2:], "gw1", 3) == "tests/unit/charts/test_main.py"
    # a worker whose kind has run out takes the other kind, in the queue's order
    assert next_scope(QUEUE[3:4], "gw2", 3) == "tests/unit/charts/test_main.py"
    assert next_scope(QUEUE[4:], "gw0", 3) == "tests/unit/training/resilience/test_hang.py"


def test_with_two_workers_or_fewer_the_queue_s_order_is_kept() -> None:
    assert not any(is_waiting_worker(w, 2) for w in ("gw0", "gw1"))
    assert next_scope(QUEUE[2:], "gw1", 2) == "tests/integration/training/test_slow_storage.py"
    assert next_scope(QUEUE[2:], "gw0", 1) == "tests/integration/training/test_slow_storage.py"


def test_every_waiting_file_exists() -> None:
    """A renamed file would silently lose its place on the waiting worker."""
    assert WAITING_FILES and all((REPO / path).is_file() for path in WAITING_FILES)
