"""Test-only: ``python -m tests.helpers.script_runner SOURCE ARGS...`` runs the Python source SOURCE as ``__main__``
with ``sys.argv`` ``[<this file>, *ARGS]``, as ``python -c SOURCE ARGS...`` would. It exists so that a test can fork a
script from the tests' worker template (:func:`tests.helpers.training_runs.forked_stdout` runs modules), which has
torch and NVRx imported already, instead of starting an interpreter that imports them (2-3 CPU-s on the 2-core
machine). A forked script ends with ``os._exit``: it must not need the interpreter's exit.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    source = sys.argv[1]
    sys.argv = [sys.argv[0], *sys.argv[2:]]
    exec(compile(source, "<script>", "exec"), {"__name__": "__main__"})
