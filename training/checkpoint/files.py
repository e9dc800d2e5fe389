"""The on-disk checkpoint format: directory names, per-file checksums, the commit marker and verification.

Directory layout under a checkpoint root::

    step_00000050.tmp/     being written (or left behind by a crash): never loaded
    step_00000075/         committed: DCP files + ``COMMITTED`` (JSON with per-file sha256 and sizes)
    quarantine/step_00000100-<unix time>/   failed verification at load; kept for inspection

Pure functions over files; the protocol that uses them is :class:`training.checkpoint.manager.CheckpointManager`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.api import CheckpointException as DcpCheckpointException

from training.checkpoint.errors import MarkerReadError
from training.common.files import sha256_file
from training.common.peer_errors import causes, lost_peer_behind

COMMIT_MARKER = "COMMITTED"
#: Most threads one rank hashes its files with (:func:`checksums`).
HASH_THREADS = 8
QUARANTINE_DIR = "quarantine"


TMP_SUFFIX = ".tmp"
#: In ``step_N.tmp/``: the checksums of the files one rank wrote, for rank 0's commit (removed by it).
RANK_SUMS = ".sha256.rank{}.json"
#: A read of a checkpoint file (its commit marker, its data while verifying or committing) that fails with an I/O error
#: (a network file system's blip) is tried this many times, pausing :data:`MARKER_RETRY_S`, then twice as long each
#: time (0.1 + 0.2 + 0.4 s), before it is a storage error: never evidence of a damaged checkpoint.
MARKER_READ_ATTEMPTS = 4
MARKER_RETRY_S = 0.1
_STEP_RE = re.compile(r"^step_(\d{8})$")
_TMP_RE = re.compile(r"^step_(\d{8})\.tmp$")


def step_dir_name(step: int) -> str:
    return f"step_{step:08d}"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checksums(files: list[Path]) -> dict[str, dict[str, Any]]:
    """``{file name: {"sha256", "bytes"}}`` of ``files``, hashed in parallel (hashlib releases the GIL), one
    thread per file up to :data:`HASH_THREADS`: a rank written by ``checkpoint.write_threads`` writers has as many
    files, and one thread hashes at about 1.5-2 GB/s."""
    if len(files) > 1:
        with ThreadPoolExecutor(min(len(files), HASH_THREADS), thread_name_prefix="checkpoint-hash") as pool:
            sums = list(pool.map(read_hash, files))
    else:
        sums = [read_hash(f) for f in files]
    return {f.name: {"sha256": s, "bytes": f.stat().st_size} for f, s in zip(files, sums, strict=True)}


def retried_read(
    read: Callable[[], Any], *, attempts: int = MARKER_READ_ATTEMPTS, sleep: Callable[[float], object] = time.sleep
) -> Any:
    """``read()``, tried again on an I/O error (not on a missing file) ``attempts`` times in all with exponential
    backoff from :data:`MARKER_RETRY_S`; the last error is raised."""
    for attempt in range(attempts):
        try:
            return read()
        except FileNotFoundError:
            raise
        except OSError:
            if attempt == attempts - 1:
                raise
            sleep(MARKER_RETRY_S * 2**attempt)
    raise AssertionError("unreachable")


def read_hash(path: Path) -> str:
    """sha256 of a checkpoint file, a transient read error retried (:func:`retried_read`)."""
    return retried_read(lambda: sha256_file(path))


def file_checksums(path: Path) -> dict[str, dict[str, Any]]:
    """:func:`checksums` of every regular file of a checkpoint dir except the marker."""
    return checksums(sorted(f for f in path.iterdir() if f.name != COMMIT_MARKER and f.is_file()))


def hash_shares(files: dict[str, dict[str, Any]], world_size: int) -> list[list[str]]:
    """Split a marker's files between ``world_size`` ranks by bytes (largest first, to the least-loaded rank).

    Deterministic from the marker alone, so every rank computes the same split without communicating.
    """
    shares: list[list[str]] = [[] for _ in range(world_size)]
    load = [0] * world_size
    for name in sorted(files, key=lambda n: (-int(files[n]["bytes"]), n)):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        shares[rank].append(name)
        load[rank] += int(files[name]["bytes"])
    return shares


def rank_sums_file(path: Path, rank: int) -> Path:
    """Where ``rank`` publishes the checksums of its files in ``step_N.tmp/`` (see :data:`RANK_SUMS`)."""
    return path / RANK_SUMS.format(rank)


def is_rank_sums(name: str) -> bool:
    """Whether a file name is a published :data:`RANK_SUMS` file (or its ``.part``): not checkpoint data."""
    return name.startswith(RANK_SUMS.split("{")[0])


def own_files(path: Path, rank: int) -> list[Path]:
    """The files ``rank`` wrote into a checkpoint dir: DCP names them ``__<rank>_<n>.distcp`` (torch and NVRx);
    rank 0, the coordinator, also wrote ``.metadata``."""
    mine = [f for f in path.iterdir() if f.is_file() and f.name.startswith(f"__{rank}_")]
    if rank == 0 and (path / ".metadata").is_file():
        mine.append(path / ".metadata")
    return sorted(mine)


def publish_rank_checksums(path: Path, rank: int) -> None:
    """Hash the files ``rank`` wrote (usually still in its page cache) and leave them for rank 0's commit.

    Never raises: a failure is published as ``{"error": ...}``, so rank 0 fails the commit at once instead of
    waiting for checksums that will not come.
    """
    try:
        sums: dict[str, Any] = checksums(own_files(path, rank))
    except OSError as exc:
        sums = {"error": f"rank {rank} could not hash its files: {describe_error(exc)}"}
    final = rank_sums_file(path, rank)
    part = final.with_name(final.name + ".part")
    with contextlib.suppress(OSError):  # the directory is gone: rank 0 gave up on this save already
        part.write_text(json.dumps(sums))
        os.replace(part, final)


def read_marker(
    path: Path, *, attempts: int = MARKER_READ_ATTEMPTS, sleep: Callable[[float], object] = time.sleep
) -> dict[str, Any] | None:
    """The parsed commit marker of a checkpoint dir; None when there is none, or when what is there is not a
    marker (see :func:`marker_problem`).

    A marker that exists but cannot be read is never taken for "not committed": the read is retried ``attempts``
    times with exponential backoff from :data:`MARKER_RETRY_S` (pausing through ``sleep``), then raises
    :class:`MarkerReadError` naming the file.
    """
    marker_file = path / COMMIT_MARKER
    try:
        data = retried_read(marker_file.read_bytes, attempts=attempts, sleep=sleep)
    except FileNotFoundError:
        return None
    except OSError as exc:
        waited = sum(MARKER_RETRY_S * 2**i for i in range(attempts - 1))
        raise MarkerReadError(
            f"cannot read the commit marker {marker_file}: {describe_error(exc)} ({attempts} attempts over "
            f"{waited:.1f} s); the checkpoint is kept, not skipped: check the file system (I/O errors in "
            "dmesg, the FSx file system's health) and restart"
        ) from exc
    try:
        marker = json.loads(data)
    except ValueError:
        return None
    return marker if isinstance(marker, dict) and "files" in marker else None


def marker_problem(path: Path) -> str:
    """Why :func:`read_marker` returned None for ``path``: the marker is missing, or is not a marker."""
    if not (path / COMMIT_MARKER).exists():
        return "commit marker missing"
    return "commit marker is not a marker (not JSON, or no file list): damaged after its commit"


def storage_layout_error(path: Path) -> str | None:
    """None if ``.metadata``'s storage entries tile every data file exactly; else the reason.

    DCP writers (torch's and NVRx's, both through ``_write_item``) append items back to back, so the
    (offset, length) entries of each file cover ``[0, size)`` with no gap or overlap. Checksums cannot
    catch metadata that describes *other* bytes (seen on H200: NVRx finalized a save with the write results
    of an abandoned earlier save, and the commit checksummed an unreadable checkpoint); this does.
    """
    try:
        md = retried_read(FileSystemReader(path).read_metadata)
    except FileNotFoundError:
        return "no .metadata"
    except OSError:
        raise  # a storage error (retried), not a damaged checkpoint
    except Exception as exc:
        return f"unreadable .metadata ({type(exc).__name__}: {str(exc)[:200]})"
    spans: dict[str, list[tuple[int, int]]] = {}
    for info in (md.storage_data or {}).values():
        spans.setdefault(info.relative_path, []).append((int(info.offset), int(info.length)))
    data_files = {f.name for f in path.iterdir() if f.suffix == ".distcp"}
    if set(spans) != data_files:
        return f".metadata names files {sorted(spans)}, the directory holds {sorted(data_files)}"
    for name, items in sorted(spans.items()):
        end = 0
        for offset, length in sorted(items):
            if offset != end:
                return f".metadata does not match {name}: an item at byte {offset}, expected {end}"
            end = offset + length
        size = (path / name).stat().st_size
        if end != size:
            return f".metadata does not match {name}: items end at byte {end}, the file has {size}"
    return None


def verify_checkpoint(path: Path, *, share: tuple[int, int] = (0, 1), check_layout: bool = True) -> str | None:
    """None if every file listed in the marker exists with the recorded size and sha256 and ``.metadata``
    describes the data files (:func:`storage_layout_error`); else the reason.

    ``share=(rank, world_size)`` hashes only that rank's part of the files (:func:`hash_shares`), so that the
    ranks of a job verify a checkpoint together (:meth:`CheckpointManager.load_latest`); sizes are checked whole.
    A read error that retries do not cure is raised (an ``OSError``): a storage error, not a reason.
    """
    marker = read_marker(path)
    if marker is None:
        return marker_problem(path)
    if ".metadata" not in marker["files"]:
        return "commit marker lists no .metadata"
    for name, want in sorted(marker["files"].items()):
        f = path / name
        if not f.is_file():
            return f"missing shard {name}"
        size = f.stat().st_size
        if size != want["bytes"]:
            return f"size mismatch in {name}: {size} bytes, expected {want['bytes']} (truncated?)"
    rank, world_size = share
    for name in sorted(hash_shares(marker["files"], world_size)[rank]):
        if read_hash(path / name) != marker["files"][name]["sha256"]:
            return f"checksum mismatch in {name} (bit flip or partial overwrite)"
    return storage_layout_error(path) if check_layout else None


def _list(root: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = pattern.match(d.name)
        if m and d.is_dir():
            found.append((int(m.group(1)), d))
    return sorted(found)


def list_step_dirs(root: Path) -> list[tuple[int, Path]]:
    """Every ``step_N`` dir, oldest first, without reading markers: a commit renames ``step_N.tmp`` to ``step_N``
    only after its marker is written, so each one was committed (its marker may since be damaged or unreadable)."""
    return _list(root, _STEP_RE)


def list_committed(root: Path) -> list[tuple[int, Path]]:
    """``step_N`` dirs with a marker, oldest first; raises :class:`MarkerReadError` for a marker that cannot be
    read (never taken for "not committed")."""
    return [(step, d) for step, d in list_step_dirs(root) if read_marker(d) is not None]


def list_partial(root: Path) -> list[tuple[int, Path]]:
    """Unfinished saves (``step_N.tmp``), oldest first: the only checkpoint dirs ever deleted as partial."""
    return _list(root, _TMP_RE)


def os_error_in(exc: BaseException) -> OSError | None:
    """The first OSError with an errno among ``exc`` and what it wraps (a storage error), if any."""
    return next((e for e in causes(exc) if isinstance(e, OSError) and e.errno is not None), None)


def describe_error(exc: BaseException) -> str:
    """One line naming the cause, e.g. ``ENOSPC: No space left on device`` (unwraps DCP's CheckpointException)."""
    seen = causes(exc)
    os_error = os_error_in(exc)
    if os_error is not None:
        return f"{errno.errorcode.get(os_error.errno, os_error.errno)}: {os_error.strerror} ({type(os_error).__name__})"
    # No errno: torch's C++ writers raise RuntimeError("... file write failed" / "No space left on device").
    inner = [e for e in seen if not isinstance(e, DcpCheckpointException)]
    for e in inner:
        for code, text in _ERRNO_TEXT.items():
            if text in str(e):
                return f"{code}: {text} ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
    cause = inner[0] if inner else exc
    return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"[:500]


def rank_failures(exc: BaseException) -> dict[int, BaseException] | None:
    """Each failed rank's error in the DCP ``CheckpointException`` that ``exc`` is or wraps (DCP gathers every rank's
    error onto every rank), or None when ``exc`` holds no DCP exception."""
    for e in causes(exc):
        if isinstance(e, DcpCheckpointException):
            out = {}
            for rank, v in e.failures.items():  # (exception, traceback) per rank
                inner = v[0] if isinstance(v, tuple) and v else v
                if isinstance(inner, BaseException):
                    out[int(rank)] = inner
            return out
    return None


def peer_cause(exc: BaseException) -> str | None:
    """``likely cause: ...`` for a save that failed because another rank stopped answering in one of its collectives
    (gloo's send/recv timeout or closed connection, NCCL's watchdog or aborted communicator), else None: on a node
    loss the save in flight fails this way, and the line should not read like a storage fault."""
    if not lost_peer_behind(exc):
        return None
    return (
        "likely cause: another rank stopped answering in the save's collective (a lost node or a failed rank); "
        "this save is given up, and the restart resumes from the newest committed checkpoint or the memory tier"
    )


#: OS error texts that a wrapped (errno-less) message may carry.
_ERRNO_TEXT = {"ENOSPC": "No space left on device", "EROFS": "Read-only file system", "EACCES": "Permission denied"}
