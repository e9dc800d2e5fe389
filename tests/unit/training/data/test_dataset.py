"""Tokenizers (bytes and a real Hugging Face tokenizer.json), generated corpus, shards and the resumable sampler."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from training.data.dataset import (
    INDEX_FILE,
    TOKENIZER,
    HFTokenizer,
    ResumableSampler,
    TokenShards,
    ensure_generated_corpus,
    generate_corpus,
    shard_dtype,
    write_index,
    write_shards,
)

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
BASE_VOCAB = 371  # 2 specials + 256 byte-level symbols + merges learnt from _SENTENCES (tokenizers 0.23.3)
_SENTENCES = [
    "The trainer restores the model state after a fault.",
    "Each node reads every shard of the data, then the job commits a checkpoint.",
    "Héllo wörld: ünïcode text survives byte-level BPE.",
]


def make_hf_tokenizer(directory: Path, *, extra_tokens: int = 0, config: dict[str, object] | None = None) -> Path:
    """A real byte-level BPE ``tokenizer.json`` (BOS id 0, EOS id 1) trained offline, plus ``extra_tokens`` added
    tokens ``<t0>``, ``<t1>``, ...; writes ``config`` as ``tokenizer_config.json`` unless it is ``None``."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_SENTENCES, trainer)
    if extra_tokens:
        tok.add_tokens([f"<t{i}>" for i in range(extra_tokens)])
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    if config is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


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
    with pytest.raises(FileNotFoundError, match=r"training\.data\.prepare"):
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


def test_shard_dtype_follows_the_vocabulary(tmp_path: Path) -> None:
    assert [shard_dtype(v) for v in (264, 65_536, 65_537, 128_256)] == ["uint16", "uint16", "uint32", "uint32"]
    write_index(tmp_path, {"train": []}, 264)
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    assert (index["dtype"], index["tokenizer"]) == ("uint16", {"kind": "bytes"})
    write_index(tmp_path, {"train": []}, 128_256, tokenizer={"kind": "hf", "eos_id": 128_001})
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    assert (index["dtype"], index["tokenizer"]) == ("uint32", {"kind": "hf", "eos_id": 128_001})


def test_old_index_without_dtype_reads_as_uint16(tmp_path: Path) -> None:
    entries = write_shards(tmp_path, ["abc" * 20], split="train")
    assert (tmp_path / entries[0]["file"]).stat().st_size == 2 * 61
    (tmp_path / INDEX_FILE).write_text(json.dumps({"format": 1, "vocab_size": 264, "splits": {"train": entries}}))
    shards = TokenShards(tmp_path, "train", seq_len=12)
    assert (shards.dtype, shards.tokenizer, len(shards)) == ("uint16", {"kind": "bytes"}, 5)
    assert shards.window(0).tolist() == list(b"abc" * 4 + b"a")
    assert shards.window(len(shards) - 1)[-1] == TOKENIZER.EOS


def test_unknown_dtype_and_out_of_range_ids_are_clear_errors(tmp_path: Path) -> None:
    entries = write_shards(tmp_path, ["a" * 100], split="train")
    write_index(tmp_path, {"train": entries}, 264, dtype="uint16")
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    (tmp_path / INDEX_FILE).write_text(json.dumps({**index, "dtype": "int8"}))
    with pytest.raises(ValueError, match=r"index\.json: unknown dtype 'int8'"):
        TokenShards(tmp_path, "train", 8)

    wide = HFTokenizer(make_hf_tokenizer(tmp_path / "tok", extra_tokens=70_000, config={"eos_token": EOS}))
    big_id = wide.encode("<t69999>", eos=False)[0]
    assert (wide.vocab_size, big_id) == (BASE_VOCAB + 70_000, BASE_VOCAB + 69_999)
    out = tmp_path / "narrow"
    with pytest.raises(ValueError, match=f"token id {big_id} does not fit uint16 shards"):
        write_shards(out, ["fine", "then <t69999>"], split="train", tokenizer=wide, dtype="uint16")
    assert not list(out.glob("*.bin"))


def test_hf_tokenizer_special_tokens_and_round_trip(tmp_path: Path) -> None:
    path = make_hf_tokenizer(tmp_path / "repo", config={"bos_token": BOS, "eos_token": {"content": EOS}})
    tok = HFTokenizer(path)
    assert (tok.BOS, tok.EOS, tok.vocab_size) == (0, 1, BASE_VOCAB)
    ids = tok.encode(_SENTENCES[2], bos=True)
    assert ids[0] == 0 and ids[-1] == 1 and 0 not in ids[1:-1] and 1 not in ids[1:-1]
    assert tok.decode(ids) == _SENTENCES[2]
    assert tok.encode_batch(_SENTENCES[:2]) == [tok.encode(s) for s in _SENTENCES[:2]]
    info = tok.info()
    assert (info["kind"], info["path"], info["eos_id"], info["bos_id"]) == ("hf", str(path / "tokenizer.json"), 1, 0)
    assert HFTokenizer(path / "tokenizer.json", eos_token=BOS).EOS == 0  # override wins over the config
    with pytest.raises(ValueError, match="'<eos>' is not in the vocabulary"):
        HFTokenizer(path, eos_token="<eos>")
    bare = make_hf_tokenizer(tmp_path / "bare")
    with pytest.raises(ValueError, match=r"cannot tell the EOS token.*--eos-token"):
        HFTokenizer(bare)
    with pytest.raises(FileNotFoundError, match="no Hugging Face tokenizer"):
        HFTokenizer(tmp_path / "nowhere")
