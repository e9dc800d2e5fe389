"""The exception a worker's SIGTERM handler raises (:mod:`training.resilience.sigterm`), here so that every room can
tell a stopped rank from a failed one (the checkpoint room finds it inside DCP's per-rank errors)."""

from __future__ import annotations


class Terminated(BaseException):
    """SIGTERM reached the worker: its pod is being stopped (an eviction, the Job's end) or its launcher is stopping
    the worker group. A ``BaseException``, so NVRx's in-process Wrapper does not restart it; the trainer unwinds, and
    its ``close`` lets this rank's in-flight checkpoint write finish (a torch async save; an NVRx writer's unfinished
    write is abandoned unless its commit already started) before the process exits 143. Raised inside a synchronous
    save, it ends that save on every rank (DCP gathers it): this rank stops, the others leave as a lost peer."""
