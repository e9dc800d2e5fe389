"""The errors of the checkpoint layer (shared by :mod:`.manager` and :mod:`.nvrx_async`)."""

from __future__ import annotations


class CheckpointError(RuntimeError):
    """Base class of checkpoint errors."""


class CheckpointWriteError(CheckpointError):
    """A checkpoint could not be written or committed (ENOSPC, unwritable directory, I/O error)."""


class NoUsableCheckpointError(CheckpointError):
    """Checkpoints exist but none is loadable: refusing to restart silently from step 0."""
