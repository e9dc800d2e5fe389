"""Where the memory tier's files live and for how long (a scope), without torch: the launchers set and remove
scopes, and must not pay torch's import for it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

#: The base directory of the memory tier's files (default ``/dev/shm``).
SHM_BASE_ENV = "TRAINING_SHM_DIR"
#: The lifetime of the memory tier's files: one pod. ``/dev/shm`` is the pod's own on Kubernetes and in the local
#: cluster runner; ``training.local`` (workers on this machine's ``/dev/shm``) sets one scope per launch and removes
#: it afterwards, as a replaced pod would lose its ``/dev/shm``.
SCOPE_ENV = "TRAINING_MEMORY_SCOPE"


def scope_dir(ckpt_root: Path) -> Path:
    """The directory of one checkpoint root's memory tier within the current scope (:data:`SCOPE_ENV`)."""
    base = Path(os.environ.get(SHM_BASE_ENV, "/dev/shm"))
    key = hashlib.sha256(str(Path(ckpt_root).resolve()).encode()).hexdigest()[:12]
    return base / f"ckpt-memtier-{key}-{os.environ.get(SCOPE_ENV) or 'pod'}"


def remove_scope(scope: str) -> None:
    """Remove every memory-tier directory of ``scope`` (what a pod's end does to its ``/dev/shm``)."""
    base = Path(os.environ.get(SHM_BASE_ENV, "/dev/shm"))
    for d in base.glob(f"ckpt-memtier-*-{scope}"):
        shutil.rmtree(d, ignore_errors=True)
