"""Whether an exception is a rank's view of a failed peer (used by the exit codes and by the checkpoint's messages),
and the walk over what an exception wraps.

torch.distributed raises these on the ranks that survive a peer's failure: gloo's send/recv and store timeouts,
closed or reset connections, NCCL's watchdog timeout and aborted communicators. Their own fault happened elsewhere.
"""

from __future__ import annotations

#: torch.distributed error types a rank sees when a peer (or the store's host) failed.
PEER_ERROR_TYPES = frozenset({"DistBackendError", "DistStoreError", "DistNetworkError"})
#: Lower-case texts of those errors (gloo, NCCL, the TCP store).
PEER_ERROR_MARKERS = (
    "timed out",
    "connection closed by peer",
    "application timeout caused pair closure",  # gloo, a collective past its timeout waiting for a peer
    "connection reset",
    "broken pipe",
    "collective operation timeout",
    "communicator was aborted",
)


def is_peer_error(exc: BaseException) -> bool:
    """``exc`` (not what it wraps) says that a peer stopped answering."""
    name = type(exc).__name__
    text = str(exc).lower()
    return name in PEER_ERROR_TYPES or "timeout" in name.lower() or any(m in text for m in PEER_ERROR_MARKERS)


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it wraps: ``__cause__``, ``__context__`` and each rank's error in DCP's exception."""
    seen: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.append(e)
        failures = getattr(e, "failures", None)
        if isinstance(failures, dict):
            for v in failures.values():  # DCP wraps each rank's error as (exception, traceback)
                inner = v[0] if isinstance(v, tuple) and v else getattr(v, "exception", v)
                if isinstance(inner, BaseException):
                    stack.append(inner)
        stack.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return seen


def lost_peer_behind(exc: BaseException) -> bool:
    """A peer's failure is what ``exc`` wraps (a checkpoint save whose collective lost its peer), and no OS error
    with an errno is (a storage failure stays one even when its text says "timed out")."""
    chain = causes(exc)
    if any(isinstance(e, OSError) and e.errno is not None for e in chain):
        return False
    return any(is_peer_error(e) for e in chain)
