"""A checkpoint storage whose reads fail for a while: the next N file hashes of the checkpoint layer raise EIO."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest


def failing_hashes(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[str]:
    """The next ``failures`` file hashes of :mod:`training.checkpoint.files` fail with EIO (a transient storage error
    when ``failures`` is small, a lasting one when it is large); returns the names of the files whose hash failed."""
    from training.checkpoint import files

    real, failed = files.sha256_file, []

    def flaky(path: Path) -> str:
        if len(failed) < failures:
            failed.append(Path(path).name)
            raise OSError(errno.EIO, "Input/output error")
        return real(path)

    monkeypatch.setattr(files, "sha256_file", flaky)
    return failed
