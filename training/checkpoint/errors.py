"""The errors of the checkpoint layer (shared by :mod:`.files`, :mod:`.manager` and :mod:`.nvrx_async`)."""

from __future__ import annotations


class CheckpointError(RuntimeError):
    """Base class of checkpoint errors."""


class CheckpointStorageError(CheckpointError):
    """The checkpoint storage failed (a write, a commit or a read): retried by the restart layers, then exit 21."""


class CheckpointWriteError(CheckpointStorageError):
    """A checkpoint could not be written or committed (ENOSPC, unwritable directory, I/O error)."""


class CheckpointWriteOverdueError(CheckpointWriteError):
    """A write in flight outlasted the wait the checkpoint section allows (every rank agreed), raised by the rank on
    its training thread before ft_launcher's section timeout would kill it: the section it was raised in is closed
    as it propagates (``ends_section``, read by :meth:`training.resilience.ft_monitor.FtMonitor.section`), so the
    error path's wait for the write runs against the heartbeat only, and the rank exits with its cause (21)."""

    ends_section = True


class CheckpointPeerError(CheckpointWriteError):
    """A save failed on other ranks only, because they were stopped (SIGTERM: an eviction, their launcher stopping
    them) or lost a peer during it; this rank's own write was fine. Exits as a lost peer (14), not a storage fault:
    the rank that was stopped is the one whose pod Kubernetes replaces."""


class CheckpointSkewError(CheckpointStorageError):
    """A rank waited past the long deadline at the barrier after its own bulk checkpoint I/O (writing, hashing,
    reading): the ranks are that far apart, or one is gone. A storage fault (the ledger counts it, exit 21), not a
    lost peer: its message names no peer error, and it wraps none."""


class CheckpointReadError(CheckpointStorageError):
    """A committed checkpoint could not be read (an I/O error, not a damaged checkpoint): never a reason to skip,
    quarantine or delete it."""


class MarkerReadError(CheckpointReadError):
    """A commit marker exists but could not be read, even after retries."""


class NoUsableCheckpointError(BaseException):
    """Checkpoints exist but none is loadable: refusing to restart silently from step 0.

    A ``BaseException``, like :class:`CheckpointRootMissingError`: no restart makes a checkpoint usable, so no layer
    retries it (as an ``Exception`` the in-process layer restarted until its budget ran out, and the worker ended
    with the generic unrecoverable code 42 instead of ``NO_USABLE_CHECKPOINT``, 20).
    """


class CheckpointRootMissingError(BaseException):
    """The checkpoint root is missing or empty although this run committed checkpoints (an unmounted volume, a
    changed ``checkpoint.dir``): refusing to start again from step 0.

    A ``BaseException``, like ``UnrecoverableError``: no restart layer can bring the checkpoints back, so none
    retries it; the process exits ``CHECKPOINT_ROOT_MISSING`` (22), which fails the Job.
    """
