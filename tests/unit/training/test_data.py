"""Tokenizer, generated corpus, shards and the resumable sampler."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from training.data import (
    INDEX_FILE,
    TOKENIZER,
    ResumableSampler,
    TokenShards,
    ensure_generated_corpus,
    generate_corpus,
    write_index,
    write_shards,
)


def test_tokenizer_round_trip_with_specials() -> None:
    ids = TOKENIZER.encode("héllo", bos=True)
    assert ids[0] == TOKENIZER.BOS and ids[-1] == TOKENIZER.EOS
    assert TOKENIZER.decode(ids) == "héllo"
    assert max(ids) < TOKENIZER.vocab_size


def test_generated_corpus_is_deterministic_and_sized() -> None:
    a = list(generate_corpus(20_000, seed=1))
    assert a == list(generate_corpus(20_000, seed=1))
    assert a != list(generate_corpus(20_000, seed=2))
    assert 20_000 <= sum(len(d) + 1 for d in a) < 22_000


def test_shards_index_and_windows(tmp_path: Path) -> None:
    docs = ["abc" * 50, "xyz" * 40]
    entries = write_shards(tmp_path, docs, split="train", shard_tokens=100)
    assert [e["tokens"] for e in entries] == [100, 100, 72]  # 151 + 121 tokens with EOS
    write_index(tmp_path, {"train": entries}, TOKENIZER.vocab_size)
    shards = TokenShards(tmp_path, "train", seq_len=16)
    assert len(shards) == 6 + 6 + 4  # (n - 1) // 16 windows per shard
    w = shards.window(0)
    assert w.shape == (17,) and bytes(w[:3].astype(np.uint8)) == b"abc"
    x, y = shards.batch([0, 5])
    assert x.shape == y.shape == (2, 16)
    assert (x[:, 1:] == y[:, :-1]).all()
    with pytest.raises(IndexError):
        shards.window(len(shards))


def test_index_mismatch_and_missing_index_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="prepare_data"):
        TokenShards(tmp_path, "train", 8)
    entries = write_shards(tmp_path, ["a" * 100], split="train")
    entries[0]["tokens"] += 1
    write_index(tmp_path, {"train": entries}, 264)
    with pytest.raises(ValueError, match="index says"):
        TokenShards(tmp_path, "train", 8)


def test_ensure_generated_corpus_is_idempotent(tmp_path: Path) -> None:
    ensure_generated_corpus(tmp_path, 50_000)
    first = (tmp_path / INDEX_FILE).read_text()
    ensure_generated_corpus(tmp_path, 50_000)
    assert (tmp_path / INDEX_FILE).read_text() == first
    index = json.loads(first)
    assert set(index["splits"]) == {"train", "val"}
    assert len(TokenShards(tmp_path, "val", 32)) > 0


def test_sampler_ranks_are_disjoint_and_cover_the_global_batch() -> None:
    ranks = [ResumableSampler(100, 4, r, 2, seed=7) for r in range(2)]
    global_one = ResumableSampler(100, 8, 0, 1, seed=7)
    for step in range(30):  # crosses epoch boundaries (100 is not a multiple of 8)
        a, b = (s.next_batch() for s in ranks)
        if (step * 8) // 100 == (step * 8 + 7) // 100:  # within one epoch, no sample repeats
            assert not set(a) & set(b)
        assert a + b == global_one.next_batch()


def test_sampler_resume_reproduces_the_sequence() -> None:
    s = ResumableSampler(50, 3, seed=11)
    for _ in range(7):
        s.next_batch()
    state = s.state_dict()
    expected = [s.next_batch() for _ in range(20)]
    t = ResumableSampler(50, 3, seed=11)
    t.load_state_dict(state)
    assert [t.next_batch() for _ in range(20)] == expected


def test_sampler_resume_with_smaller_world_continues_the_global_position() -> None:
    two = [ResumableSampler(64, 2, r, 2, seed=0) for r in range(2)]
    for _ in range(3):
        for s in two:
            s.next_batch()
    one = ResumableSampler(64, 2, 0, 1, seed=0)
    one.load_state_dict(two[0].state_dict())
    assert one.position == 12
    assert one.next_batch() == one.indices_at(12, 2)


def test_sampler_rejects_state_of_other_data() -> None:
    s = ResumableSampler(10, 2, seed=1)
    with pytest.raises(ValueError, match="different data"):
        s.load_state_dict({"position": 0, "seed": 2, "n_samples": 10})
    with pytest.raises(ValueError, match="outside world size"):
        ResumableSampler(10, 2, rank=2, world_size=2)
