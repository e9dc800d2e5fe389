"""How ``make test`` splits the suite over its xdist workers (``-n 2 --dist loadfile``): whole files, as loadfile
does, except the folders whose files share session-scoped fixtures, which go to one worker whole.

A session fixture is built once per worker. ``tests/unit/stacks/conftest.py`` synthesizes each environment's whole
platform (the default ~13 CPU-s, prod ~4) in the worker's jsii kernel, which first loads aws-cdk-lib: with the
folder's files split over two workers, both paid all of it (``pytest -n 2 tests/unit/stacks``: 64.5 CPU-s on the
2-core machine; with one worker 37.4, in about the same wall time).
"""

from __future__ import annotations

from typing import Any

#: Folders (as in a test's node id) whose files share session fixtures: each is scheduled as one unit.
SHARED_SESSION_FIXTURES = ("tests/unit/stacks/",)


def scope_of(nodeid: str) -> str:
    """The unit of work ``nodeid`` is scheduled with: its folder in :data:`SHARED_SESSION_FIXTURES`, else its file."""
    path = nodeid.split("::", 1)[0]
    return next((folder for folder in SHARED_SESSION_FIXTURES if path.startswith(folder)), path)


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's loadfile scheduling with :func:`scope_of` for its scopes (``pytest_xdist_make_scheduler``)."""
    from xdist.scheduler import LoadFileScheduling

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SharedFixtureScheduling(config, log)
