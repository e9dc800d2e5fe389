"""How ``make test`` splits the suite over its xdist workers (``-n 2 --dist loadfile``): whole files, as loadfile
does, except the folders whose files share session-scoped fixtures, which go to one worker together.

A session fixture is built once per worker. :mod:`tests.helpers.stack_synth` synthesizes each environment's whole
platform (the default ~13 CPU-s, prod ~4) in the worker's jsii kernel, which first loads aws-cdk-lib, for the unit
tests of ``stacks/`` and the CLI's test, which compares the CLI's output with it: with those files split over two
workers, both paid all of it (``pytest -n 2 tests/unit/stacks``: 64.5 CPU-s on the 2-core machine; with one worker
37.4, in about the same wall time).
"""

from __future__ import annotations

from typing import Any

#: Folders (as in a test's node id) whose files share session fixtures, by the unit they are scheduled as.
SHARED_SESSION_FIXTURES = {"tests/unit/stacks/": "stacks", "tests/integration/stacks/": "stacks"}


def scope_of(nodeid: str) -> str:
    """The unit of work ``nodeid`` is scheduled with: its folder's unit in :data:`SHARED_SESSION_FIXTURES`, else its
    file."""
    path = nodeid.split("::", 1)[0]
    return next((unit for folder, unit in SHARED_SESSION_FIXTURES.items() if path.startswith(folder)), path)


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's loadfile scheduling with :func:`scope_of` for its scopes (``pytest_xdist_make_scheduler``)."""
    from xdist.scheduler import LoadFileScheduling

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SharedFixtureScheduling(config, log)
