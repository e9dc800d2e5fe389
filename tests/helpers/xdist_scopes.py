"""How ``make test`` splits the suite over its xdist workers (``-n 3 --dist loadfile``; ``TEST_WORKERS``): whole
files, as loadfile does, except the folders whose files share session-scoped fixtures, which go to one worker
together; with three workers or more, the files that mostly wait go to a worker of their own.

A session fixture is built once per worker. :mod:`tests.helpers.stack_synth` synthesizes each environment's whole
platform (the default ~13 CPU-s, prod ~4) in the worker's jsii kernel, which first loads aws-cdk-lib, for the unit
tests of ``stacks/`` and the CLI's test, which compares the CLI's output with it: with those files split over two
workers, both paid all of it (``pytest -n 2 tests/unit/stacks``: 64.5 CPU-s on the 2-core machine; with one worker
37.4, in about the same wall time).

Waiting files (:data:`WAITING_FILES`): on two workers the suite's second half ran two such files at once and left the
2-core machine about half idle (78% busy over a 375 s suite, 44-53% from 260 s on; 2026-12-05).
With three workers or more, the last one (:func:`is_waiting_worker`) takes those files first and the others take the
rest, so the busy files run at most two at a time beside one that mostly sleeps, as before, while the sleeping is
done beside them instead of after them. A worker whose own kind of file has run out takes the other kind. The
default since df31418 (the Makefile says what that load found first).
"""

from __future__ import annotations

from typing import Any

#: Folders (as in a test's node id) whose files share session fixtures, by the unit they are scheduled as.
SHARED_SESSION_FIXTURES = {"tests/unit/stacks/": "stacks", "tests/integration/stacks/": "stacks"}

#: Test files that leave at least 3 s of one core idle, run alone (``python -m benchmarks.suite_cost``, serially,
#: 2026-12-05: busy CPU-s against wall seconds, 82 CPU-s in 166 s together): they wait on real sleeps, timeouts,
#: back-offs and slow writes, where the rest keep a core or more busy.
WAITING_FILES = frozenset(
    {
        "tests/integration/training/test_slow_storage.py",  # 17.2 CPU-s in 53.7 s
        "tests/integration/training/test_local.py",
        "tests/integration/training/test_checkpoint_collectives.py",
        "tests/integration/training/test_determinism.py",
        "tests/integration/training/test_recovery_layers.py",
        "tests/integration/training/test_sigterm_in_save.py",
        "tests/unit/training/launch/test_prefork.py",
        "tests/unit/charts/test_launch_command.py",
        "tests/unit/training/checkpoint/test_saves.py",
        "tests/unit/training/resilience/test_hang.py",
        "tests/unit/training/resilience/test_sigterm.py",
    }
)


def scope_of(nodeid: str) -> str:
    """The unit of work ``nodeid`` is scheduled with: its folder's unit in :data:`SHARED_SESSION_FIXTURES`, else its
    file."""
    path = nodeid.split("::", 1)[0]
    return next((unit for folder, unit in SHARED_SESSION_FIXTURES.items() if path.startswith(folder)), path)


def is_waiting_worker(worker_id: str, workers: int) -> bool:
    """Whether xdist worker ``worker_id`` (``gw0``, ``gw1``, ...) of ``workers`` takes :data:`WAITING_FILES` first:
    the last one, when there are at least three."""
    return workers >= 3 and worker_id == f"gw{workers - 1}"


def next_scope(queue: list[str], worker_id: str, workers: int) -> str:
    """The scope worker ``worker_id`` of ``workers`` takes next from ``queue`` (in xdist's order): with at least three
    workers, the first of its own kind (waiting files for the waiting worker, any other for the rest), else the
    first."""
    if workers < 3:
        return queue[0]
    waiting_worker = is_waiting_worker(worker_id, workers)
    return next((scope for scope in queue if (scope in WAITING_FILES) == waiting_worker), queue[0])


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's loadfile scheduling with :func:`scope_of` for its scopes and :func:`next_scope` for the order in which
    each worker takes them (``pytest_xdist_make_scheduler``)."""
    from xdist.scheduler import LoadFileScheduling

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            scope = next_scope(list(self.workqueue), node.gateway.id, len(self.nodes))
            self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return SharedFixtureScheduling(config, log)
