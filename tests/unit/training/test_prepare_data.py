"""The prepare_data CLI on real files (C4-style JSON lines, gzip, plain text) and the generated corpus."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.training_runs import REPO_ROOT, child_env
from training.data import TokenShards
from training.prepare_data import main, read_documents, source_files


def test_source_files_and_documents(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": f"doc {i}", "url": "x"}) for i in range(3)))
    with gzip.open(tmp_path / "b.json.gz", "wt") as fh:
        fh.write(json.dumps({"text": "zipped"}) + "\n")
    (tmp_path / "c.txt").write_text("para one\nline two\n\npara two\n")
    (tmp_path / "skip.bin").write_bytes(b"\0")
    files = source_files([str(tmp_path)])
    assert [f.name for f in files] == ["a.jsonl", "b.json.gz", "c.txt"]
    assert [d for f in files for d in read_documents(f)] == [
        "doc 0",
        "doc 1",
        "doc 2",
        "zipped",
        "para one\nline two",
        "para two",
    ]
    with pytest.raises(FileNotFoundError):
        source_files([str(tmp_path / "nope")])


def test_cli_tokenizes_sources_into_train_and_val(tmp_path: Path) -> None:
    src = tmp_path / "c4"
    src.mkdir()
    (src / "part.jsonl").write_text("\n".join(json.dumps({"text": "word " * 40}) for _ in range(10)))
    out = tmp_path / "data"
    assert main(["--out", str(out), "--source", str(src), "--val-every", "5", "--shard-tokens", "500"]) == 0
    index = json.loads((out / "index.json").read_text())
    assert sum(e["tokens"] for e in index["splits"]["val"]) == 2 * 201
    assert sum(e["tokens"] for e in index["splits"]["train"]) == 8 * 201
    assert len(index["splits"]["train"]) == 4  # 1608 tokens in shards of 500
    assert len(TokenShards(out, "train", 64)) > 0


def test_cli_generate_as_a_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "training.prepare_data", "--out", str(tmp_path), "--generate", "0.2"],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "generate done" in proc.stderr
    assert len(TokenShards(tmp_path, "val", 32)) > 0
