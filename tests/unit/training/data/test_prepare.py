"""The prepare_data CLI on real files (C4-style JSON lines, gzip, plain text), the generated corpus and a real
Hugging Face tokenizer.json built offline."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from tests.helpers.training_runs import REPO_ROOT, child_env
from tests.unit.training.data.test_dataset import BASE_VOCAB, BOS, EOS, make_hf_tokenizer
from training.data.dataset import TokenShards
from training.data.prepare import main, read_documents, source_files


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
    assert (index["dtype"], index["vocab_size"], index["tokenizer"]) == ("uint16", 264, {"kind": "bytes"})
    assert sum(e["tokens"] for e in index["splits"]["val"]) == 2 * 201
    assert sum(e["tokens"] for e in index["splits"]["train"]) == 8 * 201
    assert len(index["splits"]["train"]) == 4  # 1608 tokens in shards of 500
    assert len(TokenShards(out, "train", 64)) > 0


def test_cli_generate_as_a_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "training.data.prepare", "--out", str(tmp_path), "--generate", "0.2"],
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


_DOCS = [
    "The trainer restores the model state after a fault.",
    "Héllo wörld: a second document,\nwith two lines.",
    "Each node reads every shard.",
    "Unseen words: zygote quixotic 42.",
]


def _split_on(ids: list[int], eos_id: int) -> list[list[int]]:
    """Documents of a token stream that ends with ``eos_id``."""
    assert ids[-1] == eos_id
    docs, cur = [], []
    for i in ids:
        if i == eos_id:
            docs.append(cur)
            cur = []
        else:
            cur.append(i)
    return docs


def test_cli_hf_tokenizer_round_trips_documents_separated_by_eos(tmp_path: Path) -> None:
    repo = make_hf_tokenizer(tmp_path / "Tiny-3.1", config={"bos_token": {"content": BOS}, "eos_token": EOS})
    src = tmp_path / "corpus.txt"
    src.write_text("\n\n".join(_DOCS) + "\n")
    out = tmp_path / "data"
    assert main(["--out", str(out), "--source", str(src), "--tokenizer", str(repo), "--val-every", "4"]) == 0
    index = json.loads((out / "index.json").read_text())
    tok_file = repo / "tokenizer.json"
    assert (index["dtype"], index["vocab_size"]) == ("uint16", BASE_VOCAB)
    assert index["tokenizer"] == {
        "kind": "hf",
        "path": str(tok_file.resolve()),
        "sha256": hashlib.sha256(tok_file.read_bytes()).hexdigest(),
        "eos_id": 1,
        "bos_id": 0,
    }
    hf = Tokenizer.from_file(str(tok_file))
    for split, docs in (("train", _DOCS[:3]), ("val", _DOCS[3:])):
        (entry,) = index["splits"][split]
        ids = np.fromfile(out / entry["file"], dtype=np.uint16).tolist()
        assert len(ids) == entry["tokens"]
        assert [hf.decode(d) for d in _split_on(ids, 1)] == docs
        assert ids == [i for d in docs for i in [*hf.encode(d, add_special_tokens=False).ids, 1]]
    assert TokenShards(out, "train", 8).tokenizer["eos_id"] == 1


def test_cli_vocabulary_above_uint16_writes_uint32_shards(tmp_path: Path) -> None:
    repo = make_hf_tokenizer(tmp_path / "wide", extra_tokens=70_000, config={"eos_token": EOS})
    src = tmp_path / "c4.jsonl"
    src.write_text("\n".join(json.dumps({"text": f"<t{i}> step <t{69_999 - i}>"}) for i in range(8)))
    out = tmp_path / "data"
    assert main(["--out", str(out), "--source", str(src), "--tokenizer", str(repo / "tokenizer.json")]) == 0
    index = json.loads((out / "index.json").read_text())
    assert (index["dtype"], index["vocab_size"]) == ("uint32", BASE_VOCAB + 70_000)
    step = Tokenizer.from_file(str(repo / "tokenizer.json")).encode(" step ", add_special_tokens=False).ids
    expected = [i for n in range(8) for i in [BASE_VOCAB + n, *step, BASE_VOCAB + 69_999 - n, 1]]
    assert max(expected) == BASE_VOCAB + 69_999 > 65_535
    (entry,) = index["splits"]["train"]  # no val-every hit in 8 documents: train has all of them
    assert entry["tokens"] == len(expected) == 56
    assert (out / entry["file"]).stat().st_size == 4 * 56
    shards = TokenShards(out, "train", seq_len=5)  # 11 windows of 6 cover all 56 tokens
    assert (shards.dtype, len(shards)) == ("uint32", 11)
    windows = [shards.window(w).tolist() for w in range(len(shards))]
    assert [t for w in windows for t in w[:-1]] + windows[-1][-1:] == expected


def test_cli_hf_tokenizer_without_eos_fails_clearly(tmp_path: Path) -> None:
    repo = make_hf_tokenizer(tmp_path / "no-config")
    src = tmp_path / "a.txt"
    src.write_text("one document\n")
    out = tmp_path / "data"
    with pytest.raises(ValueError, match=r"cannot tell the EOS token \(no .*tokenizer_config\.json\).*--eos-token"):
        main(["--out", str(out), "--source", str(src), "--tokenizer", str(repo)])
    assert not out.exists()
    with pytest.raises(SystemExit):
        main(["--out", str(out), "--source", str(src), "--eos-token", EOS])  # --eos-token needs --tokenizer
    assert main(["--out", str(out), "--source", str(src), "--tokenizer", str(repo), "--eos-token", EOS]) == 0
    index = json.loads((out / "index.json").read_text())
    assert (index["tokenizer"]["eos_id"], index["tokenizer"]["bos_id"]) == (1, None)
    assert np.fromfile(out / "train_00000.bin", dtype=np.uint16)[-1] == 1


#: The preparation alone in a process of its own: tracemalloc counts every thread's allocations, and a test
#: process has others (the suite once saw a 9.3 MB peak in a worker for what takes under 2 MB here).
PEAK_SCRIPT = """
import sys, tracemalloc
from pathlib import Path
from training.data.dataset import generate_corpus
from training.data.prepare import prepare
corpus_bytes = int(sys.argv[2])
tracemalloc.start()
counts = prepare(Path(sys.argv[1]), generate_corpus(corpus_bytes, 0), val_every=100, shard_tokens=1 << 16)
print(counts["train"] + counts["val"], tracemalloc.get_traced_memory()[1])
"""


def test_prepare_streams_the_corpus_instead_of_holding_it(tmp_path: Path) -> None:
    """The cluster's dataset Job has 16 GiB for corpora far larger: memory must not grow with the corpus."""
    from tests.helpers.training_runs import python_stdout

    corpus_bytes = 8_000_000
    tokens, peak = map(int, python_stdout(["-c", PEAK_SCRIPT, str(tmp_path), str(corpus_bytes)], 120).split())
    assert tokens > 0.95 * corpus_bytes  # bytes tokenizer: ~1 token per byte
    assert peak < corpus_bytes // 4, f"peak {peak} bytes while preparing {corpus_bytes} bytes of text"


def test_prepare_without_val_documents_reuses_the_last_train_document(tmp_path: Path) -> None:
    from training.data.prepare import prepare

    counts = prepare(tmp_path, ["first doc", "second doc"], val_every=0, shard_tokens=1 << 16)
    assert counts == {"train": 21, "val": 11}  # 9 + 10 bytes and an EOS each; val = "second doc" + EOS
    from training.data.dataset import TOKENIZER

    assert TOKENIZER.decode(np.fromfile(tmp_path / "val_00000.bin", dtype=np.uint16).tolist()) == "second doc"
