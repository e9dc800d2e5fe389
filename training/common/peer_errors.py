"""Whether an exception is a rank's view of a failed peer (used by the exit codes and by the checkpoint's messages).

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
