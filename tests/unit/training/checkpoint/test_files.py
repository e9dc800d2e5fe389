"""The on-disk format's pure functions: error descriptions, the split of hashing work, reading commit markers."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from tests.helpers.training_runs import make_marker_unreadable, restore_marker
from training.checkpoint.errors import MarkerReadError
from training.checkpoint.files import COMMIT_MARKER, describe_error, hash_shares, read_marker


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


def test_rank_failures_reads_each_ranks_error_out_of_dcps_wrapper() -> None:
    """DCP gathers (exception, traceback) per failed rank; a wrapper around it (our CheckpointWriteError) is seen
    through, and an exception without DCP's has none."""
    from torch.distributed.checkpoint.api import CheckpointException as DcpError

    from training.checkpoint.errors import CheckpointWriteError
    from training.checkpoint.files import rank_failures
    from training.common.terminated import Terminated

    stopped, full = Terminated("SIGTERM"), OSError(28, "No space left on device")
    dcp = DcpError("save failed", {1: (stopped, None), 3: (full, None)})
    assert rank_failures(dcp) == {1: stopped, 3: full}
    wrapped = CheckpointWriteError("checkpoint at step 5 failed")
    wrapped.__cause__ = dcp
    assert rank_failures(wrapped) == {1: stopped, 3: full}
    assert rank_failures(full) is None


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


def _committed_dir(tmp_path: Path) -> Path:
    ckpt = tmp_path / "step_00000002"
    ckpt.mkdir()
    (ckpt / COMMIT_MARKER).write_text(json.dumps({"step": 2, "files": {".metadata": {"sha256": "0", "bytes": 1}}}))
    return ckpt


def test_an_unreadable_marker_is_retried_with_backoff_then_an_error_naming_the_file(tmp_path: Path) -> None:
    ckpt = _committed_dir(tmp_path)
    make_marker_unreadable(ckpt)
    pauses: list[float] = []
    with pytest.raises(MarkerReadError) as info:
        read_marker(ckpt, sleep=pauses.append)
    assert pauses == [0.1, 0.2, 0.4]
    message = str(info.value)
    assert f"cannot read the commit marker {ckpt / COMMIT_MARKER}: EISDIR" in message
    assert "4 attempts over 0.7 s" in message and "the checkpoint is kept" in message


def test_a_marker_readable_again_after_a_transient_error_is_read(tmp_path: Path) -> None:
    ckpt = _committed_dir(tmp_path)
    data = make_marker_unreadable(ckpt)
    pauses: list[float] = []

    def recover(pause: float) -> None:  # the file system recovers during the first pause
        pauses.append(pause)
        restore_marker(ckpt, data)

    assert read_marker(ckpt, sleep=recover) == json.loads(data)
    assert pauses == [0.1]


def test_a_missing_or_damaged_marker_is_no_marker(tmp_path: Path) -> None:
    ckpt = _committed_dir(tmp_path)
    (ckpt / COMMIT_MARKER).write_bytes(b"\xff{not json")
    assert read_marker(ckpt) is None
    (ckpt / COMMIT_MARKER).unlink()
    assert read_marker(ckpt) is None


def test_checksums_of_several_files_are_each_files_own(tmp_path: Path) -> None:
    """Hashed in parallel (one file per NVRx writer), each sum still belongs to its file (known sha256 values)."""
    from training.checkpoint.files import checksums

    contents = {"__0_0.distcp": b"abc", "__0_1.distcp": b"", "__0_2.distcp": b"x" * (5 << 20), ".metadata": b"abc"}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    sums = checksums(sorted(tmp_path.iterdir()))
    abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert sums["__0_0.distcp"] == {"sha256": abc, "bytes": 3}
    assert sums[".metadata"] == {"sha256": abc, "bytes": 3}
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sums["__0_1.distcp"] == {"sha256": empty, "bytes": 0}
    assert sums["__0_2.distcp"]["bytes"] == 5 << 20
    assert sums["__0_2.distcp"]["sha256"] == "dba67a476fa78973aabb087f214a1010f3bebca053674e0af50dfe5a582112be"


def test_a_save_that_lost_its_peer_says_so_and_a_storage_error_does_not() -> None:
    """The messages of the save that failed at the demo's node loss (gloo, torch 2.13), and NCCL's watchdog."""
    from training.checkpoint.files import peer_cause

    gloo = RuntimeError(
        "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:129] "
        "Timed out waiting 3000ms for send operation to complete"
    )
    nccl = RuntimeError("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)")
    wrapped = RuntimeError("checkpoint planning failed")
    wrapped.__cause__ = gloo
    for exc in (gloo, nccl, wrapped):
        assert str(peer_cause(exc)).startswith("likely cause: another rank stopped answering in the save's collective")
    assert peer_cause(OSError(28, "No space left on device")) is None
    assert peer_cause(RuntimeError("file write failed")) is None
