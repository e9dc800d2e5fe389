"""The processes that start or feed a run but never train stay free of torch (1.4 CPU-s per import): the local
launcher, the local cluster's controller and the dataset Job. Each is started once per run (the dataset Job once
per local cluster), so torch there cost the test suite about a minute of CPU.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.training_runs import REPO_ROOT


@pytest.mark.parametrize("module", ["training.local", "training.cluster.runner", "training.data.prepare"])
def test_the_entry_point_does_not_import_torch(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert out.stdout.strip() == "[]"
