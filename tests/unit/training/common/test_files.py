"""Atomic JSON writes (``training.common.files``): writers that share a pid (pods in pid namespaces of their own, on
shared storage; here threads of one process) never take each other's temp file away."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from training.common.files import atomic_write_json, sha256_file


def test_concurrent_writers_with_one_pid_all_land_and_leave_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "exit_status.json"
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        for i in range(40):
            try:
                atomic_write_json(path, {"writer": w, "i": i})
            except BaseException as exc:  # a pid-named temp file: FileNotFoundError at the rename
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    last = json.loads(path.read_text())
    assert set(last) == {"writer", "i"} and last["i"] == 39  # one writer's complete last record
    assert [p.name for p in tmp_path.iterdir()] == ["exit_status.json"]


def test_sha256_of_a_known_content(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert sha256_file(f) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
