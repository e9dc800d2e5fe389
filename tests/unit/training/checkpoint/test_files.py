"""The on-disk format's pure functions: error descriptions and the split of hashing work between ranks."""

from __future__ import annotations

import errno

from training.checkpoint.files import describe_error, hash_shares


def test_describe_names_the_os_error_inside_dcp_wrappers() -> None:
    """DCP wraps each rank's failure; the message must still name the cause (with or without an errno)."""
    from torch.distributed.checkpoint.api import CheckpointException as DcpError

    from training.checkpoint.files import describe_error

    with_errno = DcpError("save failed", {0: (OSError(28, "No space left on device"), None)})
    assert describe_error(with_errno).startswith("ENOSPC: No space left on device")
    text_only = DcpError("save failed", {1: (RuntimeError("[enforce fail] No space left on device"), None)})
    assert describe_error(text_only).startswith("ENOSPC: No space left on device (RuntimeError")
    other = DcpError("save failed", {0: (ValueError("bad plan"), None)})
    assert describe_error(other) == "ValueError: bad plan"


def test_hash_shares_split_the_bytes_evenly_and_cover_each_file_once() -> None:
    files = {name: {"bytes": size} for name, size in [("a", 100), ("b", 90), ("c", 60), ("d", 40), (".metadata", 5)]}
    shares = hash_shares(files, 2)
    assert sorted(n for share in shares for n in share) == sorted(files)
    loads = [sum(files[n]["bytes"] for n in share) for share in shares]
    assert loads == [145, 150]  # a+d+.metadata, b+c
    assert hash_shares(files, 2) == shares  # every rank computes the same split
    assert hash_shares(files, 1) == [sorted(files, key=lambda n: -files[n]["bytes"])]
    assert [len(s) for s in hash_shares(files, 8)] == [1, 1, 1, 1, 1, 0, 0, 0]


def test_error_codes_are_named() -> None:
    assert describe_error(OSError(errno.ENOSPC, "No space left on device")).startswith("ENOSPC")
