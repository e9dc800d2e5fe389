"""The commit protocol, as functions over the on-disk format of :mod:`training.checkpoint.files`.

Every rank writes its ``.distcp`` files into ``step_N.tmp/``; DCP's coordinator writes ``.metadata`` only after
gathering every rank's write result, so ``.metadata`` in a save directory means every rank has written. Every rank
then hashes the files it wrote (still in its page cache, so no rank reads another's bytes back from shared storage)
and publishes the sums in ``.sha256.rank<r>.json``; rank 0 merges them, refuses a file no rank hashed, writes
``COMMITTED`` (fsync), renames the directory to ``step_N/`` (fsync of the parent) and applies retention.

One commit, :func:`commit_save`, serves the three ways a save reaches it: a synchronous save (inline), an async save
(on a ``checkpoint-commit`` thread once the write has finished, see :mod:`training.checkpoint.saves`), and a save
whose write finished on every rank but whose commit a fault interrupted (:func:`commit_finished_saves`, at restore:
such a save is committed, not deleted).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from training.checkpoint.errors import CheckpointError, MarkerReadError
from training.checkpoint.files import (
    COMMIT_MARKER,
    QUARANTINE_DIR,
    checksums,
    describe_error,
    fsync_dir,
    is_rank_sums,
    list_partial,
    list_step_dirs,
    own_files,
    rank_sums_file,
    read_marker,
    step_dir_name,
    storage_layout_error,
)
from training.telemetry.events import EventLog

#: Name of the background threads that hash and commit a finished write (see :func:`join_commits`).
COMMIT_THREAD = "checkpoint-commit"
#: How long a rank waits for the other ranks' part of an async save (their checksums, their NVRx writes).
PEER_WAIT_S = 600.0
#: Bumped by :func:`abandon_commits`: a commit started before it stops waiting for other ranks.
_GENERATION = [0]


def generation() -> int:
    return _GENERATION[0]


def abandon_commits() -> None:
    """A commit waiting for another rank's checksums stops waiting (an in-process restart began)."""
    _GENERATION[0] += 1


def join_commits(timeout_s: float | None = None) -> None:
    """Wait for the background commits of this process (before listing or removing checkpoint dirs)."""
    for t in threading.enumerate():
        if t.name == COMMIT_THREAD and t is not threading.current_thread():
            t.join(timeout_s)


def wait_rank_sums(tmp: Path, rank: int, *, given_up: Callable[[], bool], wait_s: float = PEER_WAIT_S) -> dict:
    """The checksums ``rank`` published in ``tmp`` (polls; gives up when ``given_up()`` or after ``wait_s``)."""
    path = rank_sums_file(tmp, rank)
    deadline = time.monotonic() + wait_s
    while not path.is_file():
        if given_up():
            raise CheckpointError(f"save in {tmp.name} was abandoned; not committed")
        if time.monotonic() > deadline:
            raise CheckpointError(f"rank {rank} published no checksums within {wait_s:.0f} s")
        time.sleep(0.05)
    sums = json.loads(path.read_text())
    if "error" in sums:
        raise CheckpointError(sums["error"])
    return sums


def commit_save(
    root: Path,
    tmp: Path,
    step: int,
    *,
    world_size: int,
    backend: str,
    rank_sums: Callable[[int], dict[str, Any]],
    events: EventLog,
    keep_last: int,
    t_begin: float,
) -> None:
    """Rank 0: checksums (its own files, then ``rank_sums(r)`` of every other rank), marker, rename, retention.

    Raises on any failure (a missing ``.metadata``, a file no rank hashed, a layout that does not tile the data).
    """
    if not (tmp / ".metadata").is_file():
        raise OSError(errno.EIO, f"{tmp} has no .metadata: the write did not complete")
    files = checksums(own_files(tmp, 0))
    for rank in range(1, world_size):
        files.update(rank_sums(rank))
    on_disk = {f.name for f in tmp.iterdir() if f.is_file() and not is_rank_sums(f.name)}
    unhashed = sorted(on_disk - files.keys() - {COMMIT_MARKER})
    if unhashed:
        raise CheckpointError(f"refusing to commit {tmp}: no rank hashed {', '.join(unhashed[:5])}")
    for rank in range(1, world_size):
        rank_sums_file(tmp, rank).unlink(missing_ok=True)
    layout = storage_layout_error(tmp)
    if layout is not None:
        raise CheckpointError(f"refusing to commit {tmp}: {layout}")
    marker = {"step": step, "world_size": world_size, "backend": backend, "committed_at": time.time(), "files": files}
    tmp_marker = tmp / (COMMIT_MARKER + ".part")
    with tmp_marker.open("w") as fh:
        json.dump(marker, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp_marker, tmp / COMMIT_MARKER)
    fsync_dir(tmp)
    final = root / step_dir_name(step)
    if final.exists():  # an older copy of the same step (e.g. after allow_fresh_start): kept, not deleted
        quarantine(root, step, final, "replaced by a new save of the same step", events)
    os.replace(tmp, final)
    fsync_dir(root)
    events.emit(
        "ckpt_committed",
        step=step,
        write_s=round(time.perf_counter() - t_begin, 6),
        path=str(final),
        bytes=sum(f["bytes"] for f in files.values()),
        backend=backend,
    )
    retention(root, step, keep_last)


def retention(root: Path, newest: int, keep_last: int) -> None:
    """Remove committed checkpoints beyond ``keep_last`` and unfinished saves up to ``newest``. A checkpoint whose
    marker is missing, damaged or unreadable is left alone (the next restore verifies or quarantines it)."""
    committed = []
    for _, path in list_step_dirs(root):
        try:
            if read_marker(path) is not None:
                committed.append(path)
        except MarkerReadError as exc:
            print(f"[checkpoint] retention leaves {path} alone: {exc}", flush=True)
    for path in committed[:-keep_last]:
        shutil.rmtree(path, ignore_errors=True)
    for step, path in list_partial(root):
        if step <= newest:  # partial leftovers of earlier (crashed) saves
            shutil.rmtree(path, ignore_errors=True)


def remove_unfinished(root: Path, up_to: int) -> list[int]:
    """Remove the saves up to step ``up_to`` whose write did not finish (``step_N.tmp`` without ``.metadata``: a
    failed save's leftovers, never loadable); returns their steps. A finished one is kept for the restore's commit."""
    removed = []
    for step, path in list_partial(root):
        if step <= up_to and not (path / ".metadata").is_file():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(step)
    return removed


def quarantine(root: Path, step: int, path: Path, reason: str, events: EventLog) -> None:
    qdir = root / QUARANTINE_DIR
    qdir.mkdir(parents=True, exist_ok=True)
    dest = qdir / f"{path.name}-{int(time.time() * 1000)}"
    os.replace(path, dest)
    print(f"[checkpoint] quarantined {path} -> {dest}: {reason}", flush=True)
    events.emit("ckpt_quarantined", step=step, reason=reason, path=str(dest))


def _sums_at_restore(tmp: Path, rank: int) -> dict[str, Any]:
    """What ``rank`` published for ``tmp``; its files hashed here when it published nothing usable (the fault came
    between its write and its hashing: a read-back, on this rare path only)."""
    path = rank_sums_file(tmp, rank)
    try:
        sums = json.loads(path.read_text())
        if "error" not in sums:
            return sums
    except (OSError, ValueError):
        pass
    return checksums(own_files(tmp, rank))


def commit_finished_saves(root: Path, *, backend: str, events: EventLog, keep_last: int) -> list[int]:
    """Rank 0 at restore, with no save of this job in flight: commit every ``step_N.tmp`` whose write finished on
    every rank (``.metadata`` is there), delete the others. A finished save that cannot be read (after retries) is
    kept for the next restore. Returns the steps committed.

    The saving world is read from the data files (``__<r>_<n>.distcp``), not assumed to be the current one.
    """
    done = []
    for step, tmp in list_partial(root):
        if not (tmp / ".metadata").is_file():
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        writers = {int(f.name[2:].split("_", 1)[0]) for f in tmp.glob("__*_*.distcp")}
        try:
            commit_save(
                root,
                tmp,
                step,
                world_size=max(writers, default=0) + 1,
                backend=backend,
                rank_sums=lambda r, tmp=tmp: _sums_at_restore(tmp, r),
                events=events,
                keep_last=keep_last,
                t_begin=time.perf_counter(),
            )
        except OSError as exc:  # retried already: a storage error; the save may be whole, so it is kept
            print(f"[checkpoint] kept the finished save {tmp}, not committed yet: {describe_error(exc)}", flush=True)
            continue
        except CheckpointError as exc:
            print(f"[checkpoint] not committing the finished save {tmp}: {describe_error(exc)}", flush=True)
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        print(f"[checkpoint] committed step {step}: its write had finished on every rank before the fault", flush=True)
        done.append(step)
    return done
