"""The memory tier's scopes: one directory per checkpoint root and scope, removed whole at the scope's end."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.checkpoint import shm_scope
from training.checkpoint.shm_scope import remove_scope, scope_dir


def test_scopes_are_per_checkpoint_root_and_removed_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shm_scope.SHM_BASE_ENV, str(tmp_path / "shm"))
    (tmp_path / "shm").mkdir()
    monkeypatch.setenv(shm_scope.SCOPE_ENV, "launch7")
    a, b = scope_dir(tmp_path / "ckpt-a"), scope_dir(tmp_path / "ckpt-b")
    assert a != b and a.name.startswith("ckpt-memtier-") and a.name.endswith("-launch7")
    monkeypatch.delenv(shm_scope.SCOPE_ENV)
    c = scope_dir(tmp_path / "ckpt-a")
    assert c.name.endswith("-pod")  # Kubernetes: /dev/shm is the pod's own
    for d in (a, b, c):
        d.mkdir()
    remove_scope("launch7")
    assert [p.name for p in (tmp_path / "shm").iterdir()] == [c.name]
