"""Tokenizers, offline corpus, memory-mapped token shards and the resumable data-parallel sampler.

Shard layout of a data directory::

    index.json          {"format": 1, "dtype": "uint16", "vocab_size": V, "tokenizer": {"kind": "bytes"},
                         "splits": {"train": [...], "val": [...]}}
    train_00000.bin     tokens (``dtype``), documents separated by EOS
    val_00000.bin

``dtype`` is ``uint16`` when ``vocab_size <= 65536``, else ``uint32`` (an index without it is ``uint16``).
``tokenizer`` names what made the data: ``{"kind": "bytes"}`` (:class:`ByteTokenizer`) or
``{"kind": "hf", "path": ..., "sha256": ..., "eos_id": ..., "bos_id": ...}`` (:class:`HFTokenizer`).
Every split entry is ``{"file": name, "tokens": n}``. Shards are read with ``numpy.memmap`` so many
ranks can share one copy on a shared file system.
"""

from __future__ import annotations

import itertools
import json
import os
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from training.common.files import sha256_file

if TYPE_CHECKING:
    import torch

INDEX_FILE = "index.json"
DTYPE = np.uint16  # shards of an index without "dtype"
DTYPES: dict[str, type[np.unsignedinteger]] = {"uint16": np.uint16, "uint32": np.uint32}
FORMAT_VERSION = 1
HF_TOKENIZER_FILE = "tokenizer.json"
HF_TOKENIZER_CONFIG = "tokenizer_config.json"
ENCODE_BATCH = 256  # documents per encode_batch call


def shard_dtype(vocab_size: int) -> str:
    """The narrowest shard dtype that holds every id of a ``vocab_size`` vocabulary."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


class Tokenizer(Protocol):
    """What :func:`write_shards` needs of a tokenizer."""

    vocab_size: int

    def encode_batch(self, texts: list[str]) -> list[list[int]]: ...

    def info(self) -> dict[str, Any]: ...


class ByteTokenizer:
    """Bytes 0-255 map to themselves; specials follow. ``vocab_size`` is padded to a multiple of 8."""

    BOS = 256
    EOS = 257
    PAD = 258
    vocab_size = 264

    def encode(self, text: str, *, bos: bool = False, eos: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        return ([self.BOS] if bos else []) + ids + ([self.EOS] if eos else [])

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode`` (with EOS) of every text."""
        return [self.encode(t) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def info(self) -> dict[str, Any]:
        """The ``tokenizer`` entry of ``index.json``."""
        return {"kind": "bytes"}


TOKENIZER = ByteTokenizer()


def _config_token(value: Any) -> str | None:
    """A ``bos_token`` / ``eos_token`` of ``tokenizer_config.json``: a string or ``{"content": ...}``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` (``tokenizers`` library); every encoded document ends with ``EOS``.

    ``path`` is the file or a directory holding it (a model repo). BOS/EOS come from the
    ``tokenizer_config.json`` next to it unless ``bos_token`` / ``eos_token`` are given; EOS is required.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, eos_token: str | None = None, bos_token: str | None = None
    ) -> None:
        from tokenizers import Tokenizer as _Tokenizer  # only data preparation needs it

        file = Path(path)
        if file.is_dir():
            file = file / HF_TOKENIZER_FILE
        if not file.is_file():
            raise FileNotFoundError(f"no Hugging Face tokenizer at {path} (expected {HF_TOKENIZER_FILE} or its dir)")
        self.path = file.resolve()
        self._tok = _Tokenizer.from_file(str(self.path))
        self.vocab_size = int(self._tok.get_vocab_size(with_added_tokens=True))
        config_path = self.path.parent / HF_TOKENIZER_CONFIG
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        eos = eos_token or _config_token(config.get("eos_token"))
        if eos is None:
            where = f"no eos_token in {config_path}" if config_path.is_file() else f"no {config_path}"
            raise ValueError(f"{self.path}: cannot tell the EOS token ({where}); pass it with --eos-token TEXT")
        self.EOS = self._token_id(eos, "EOS")
        bos = bos_token or _config_token(config.get("bos_token"))
        self.BOS = self._token_id(bos, "BOS") if bos else None

    def _token_id(self, token: str, role: str) -> int:
        token_id = self._tok.token_to_id(token)
        if token_id is None:
            raise ValueError(f"{role} token {token!r} is not in the vocabulary of {self.path}")
        return int(token_id)

    def encode(self, text: str, *, bos: bool = False, eos: bool = True) -> list[int]:
        if bos and self.BOS is None:
            raise ValueError(f"{self.path} has no BOS token")
        head = [self.BOS] if bos and self.BOS is not None else []
        return [*head, *self._tok.encode(text, add_special_tokens=False).ids, *([self.EOS] if eos else [])]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode`` (with EOS) of every text, in parallel."""
        return [[*e.ids, self.EOS] for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)

    def info(self) -> dict[str, Any]:
        """The ``tokenizer`` entry of ``index.json``."""
        return {
            "kind": "hf",
            "path": str(self.path),
            "sha256": sha256_file(self.path),
            "eos_id": self.EOS,
            "bos_id": self.BOS,
        }


_SUBJECTS = [
    "the cluster",
    "a worker",
    "the scheduler",
    "each node",
    "the trainer",
    "the checkpoint",
    "a rank",
    "the job",
]
_VERBS = ["writes", "restores", "restarts", "shards", "reads", "verifies", "commits", "replays", "monitors", "loads"]
_OBJECTS = ["the model state", "every shard", "the optimizer", "a heartbeat", "the data position", "the loss curve"]
_ADVERBS = ["quickly", "safely", "again", "atomically", "in order", "after a fault", "before the next step"]


def generate_corpus(n_bytes: int, seed: int = 0) -> Iterator[str]:
    """Deterministic project-generated English-like documents totalling about ``n_bytes`` bytes."""
    rng = random.Random(seed)
    produced = 0
    while produced < n_bytes:
        sentences = []
        for _ in range(rng.randint(3, 8)):
            n = rng.randint(0, 999)
            sentences.append(
                f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
                f"{rng.choice(_ADVERBS)} at step {n}, then step {n + 1} follows."
            )
        doc = " ".join(sentences)
        produced += len(doc) + 1
        yield doc


class ShardWriter:
    """Tokenizes documents, as they come, into ``<split>_NNNNN.bin`` files of at most ``shard_tokens`` tokens.

    ``dtype`` defaults to :func:`shard_dtype` of the tokenizer's vocabulary; an id it cannot hold is a ``ValueError``.
    Memory stays at about one shard of tokens, whatever the corpus size.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        *,
        split: str,
        shard_tokens: int = 1 << 22,
        tokenizer: Tokenizer = TOKENIZER,
        dtype: str | None = None,
    ) -> None:
        self.dtype = dtype or shard_dtype(tokenizer.vocab_size)
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown shard dtype {self.dtype!r} (one of {', '.join(DTYPES)})")
        self._np_dtype, self._limit = DTYPES[self.dtype], int(np.iinfo(DTYPES[self.dtype]).max)
        self.out, self.split, self.shard_tokens, self.tokenizer = Path(out_dir), split, shard_tokens, tokenizer
        self.out.mkdir(parents=True, exist_ok=True)
        self.entries: list[dict[str, Any]] = []
        self.documents = 0
        self._chunks: list[np.ndarray] = []
        self._pending = 0

    def _flush(self, arr: np.ndarray) -> None:
        name = f"{self.split}_{len(self.entries):05d}.bin"
        tmp = self.out / (name + ".tmp")
        arr.tofile(tmp)
        os.replace(tmp, self.out / name)
        self.entries.append({"file": name, "tokens": int(arr.size)})

    def add(self, documents: list[str]) -> None:
        """Tokenize a batch of documents (one ``encode_batch`` call) and write every shard that filled up."""
        for ids in self.tokenizer.encode_batch(documents):
            arr = np.asarray(ids, dtype=np.int64)
            if arr.size and (arr.min() < 0 or arr.max() > self._limit):
                bad = int(arr.max() if arr.max() > self._limit else arr.min())
                raise ValueError(
                    f"token id {bad} does not fit {self.dtype} shards (ids 0..{self._limit}; "
                    f"vocab_size {self.tokenizer.vocab_size})"
                )
            self._chunks.append(arr.astype(self._np_dtype))
            self._pending += arr.size
            self.documents += 1
            if self._pending >= self.shard_tokens:
                buf = np.concatenate(self._chunks)
                while buf.size >= self.shard_tokens:
                    self._flush(buf[: self.shard_tokens])
                    buf = buf[self.shard_tokens :]
                self._chunks, self._pending = [buf], int(buf.size)

    def close(self) -> list[dict[str, Any]]:
        """Write the last (partial) shard - an empty one if nothing was written - and return the index entries."""
        if self._pending or not self.entries:
            self._flush(np.concatenate(self._chunks) if self._chunks else np.empty(0, dtype=self._np_dtype))
            self._chunks, self._pending = [], 0
        return self.entries


def write_shards(
    out_dir: str | os.PathLike[str],
    documents: Iterable[str],
    *,
    split: str,
    shard_tokens: int = 1 << 22,
    tokenizer: Tokenizer = TOKENIZER,
    dtype: str | None = None,
) -> list[dict[str, Any]]:
    """All of ``documents`` through one :class:`ShardWriter`; returns its index entries."""
    writer = ShardWriter(out_dir, split=split, shard_tokens=shard_tokens, tokenizer=tokenizer, dtype=dtype)
    docs = iter(documents)
    while batch := list(itertools.islice(docs, ENCODE_BATCH)):
        writer.add(batch)
    return writer.close()


def write_index(
    out_dir: str | os.PathLike[str],
    splits: dict[str, list[dict[str, Any]]],
    vocab_size: int,
    *,
    tokenizer: dict[str, Any] | None = None,
    dtype: str | None = None,
) -> Path:
    """Write ``index.json`` atomically (readers treat its presence as "data ready").

    ``dtype`` defaults to :func:`shard_dtype` of ``vocab_size`` (what :func:`write_shards` chose); ``tokenizer`` is
    the tokenizer's ``info()`` (default: the byte tokenizer).
    """
    dtype = dtype or shard_dtype(vocab_size)
    if dtype not in DTYPES:
        raise ValueError(f"unknown shard dtype {dtype!r} (one of {', '.join(DTYPES)})")
    index = {
        "format": FORMAT_VERSION,
        "dtype": dtype,
        "vocab_size": vocab_size,
        "tokenizer": tokenizer or TOKENIZER.info(),
        "splits": splits,
    }
    path = Path(out_dir) / INDEX_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(index))
    os.replace(tmp, path)
    return path


def ensure_generated_corpus(out_dir: str | os.PathLike[str], n_bytes: int = 1 << 20, seed: int = 0) -> Path:
    """Generate the offline corpus (train + a small val split) unless ``index.json`` already exists."""
    out = Path(out_dir)
    if (out / INDEX_FILE).is_file():
        return out
    train = write_shards(out, generate_corpus(n_bytes, seed), split="train")
    val = write_shards(out, generate_corpus(max(n_bytes // 16, 4096), seed + 1_000_003), split="val")
    write_index(out, {"train": train, "val": val}, TOKENIZER.vocab_size)
    return out


class TokenShards:
    """All shards of one split, memory-mapped; exposes fixed-length windows of ``seq_len + 1`` tokens."""

    def __init__(self, data_dir: str | os.PathLike[str], split: str, seq_len: int) -> None:
        self.dir = Path(data_dir)
        index_path = self.dir / INDEX_FILE
        if not index_path.is_file():
            raise FileNotFoundError(f"no {INDEX_FILE} in {self.dir}; run `python -m training.data.prepare` first")
        index = json.loads(index_path.read_text())
        if split not in index["splits"]:
            raise KeyError(f"split {split!r} not in {index_path} (has {', '.join(index['splits'])})")
        self.vocab_size = int(index["vocab_size"])
        self.dtype = str(index.get("dtype", "uint16"))
        if self.dtype not in DTYPES:
            raise ValueError(f"{index_path}: unknown dtype {self.dtype!r} (expected one of {', '.join(DTYPES)})")
        self.tokenizer: dict[str, Any] = index.get("tokenizer", {"kind": "bytes"})
        self.seq_len = seq_len
        self._maps: list[np.memmap] = []
        self._starts: list[int] = []  # first window id of each shard
        total = 0
        for entry in index["splits"][split]:
            mm = np.memmap(self.dir / entry["file"], dtype=DTYPES[self.dtype], mode="r")
            if mm.size != entry["tokens"]:
                raise ValueError(f"{entry['file']}: {mm.size} tokens on disk, index says {entry['tokens']}")
            n_windows = (mm.size - 1) // seq_len
            if n_windows <= 0:
                continue
            self._maps.append(mm)
            self._starts.append(total)
            total += n_windows
        if total == 0:
            raise ValueError(f"split {split!r} in {self.dir} is shorter than one window of {seq_len + 1} tokens")
        self.n_windows = total

    def __len__(self) -> int:
        return self.n_windows

    def window(self, i: int) -> np.ndarray:
        """Window ``i``: ``seq_len + 1`` tokens (inputs are ``[:-1]``, targets ``[1:]``)."""
        if not 0 <= i < self.n_windows:
            raise IndexError(i)
        shard = int(np.searchsorted(self._starts, i, side="right")) - 1
        off = (i - self._starts[shard]) * self.seq_len
        return np.asarray(self._maps[shard][off : off + self.seq_len + 1], dtype=np.int64)

    def batch(self, ids: Iterable[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets, each ``(len(ids), seq_len)`` int64."""
        import torch  # here, not at the top: the dataset Job (training.data.prepare) never needs torch

        arr = torch.from_numpy(np.stack([self.window(i) for i in ids]))
        return arr[:, :-1].contiguous(), arr[:, 1:].contiguous()


@dataclass
class ResumableSampler:
    """Deterministic shuffled window order, sharded by data-parallel rank; the position is checkpointable.

    ``position`` counts global samples consumed. Each epoch uses the permutation seeded by
    ``(seed, epoch)``. A step consumes ``micro_batch_size * world_size`` samples; rank ``r`` takes the
    ``r``-th slice. Because the position is global, a resumed run may use a different world size.
    """

    n_samples: int
    micro_batch_size: int
    rank: int = 0
    world_size: int = 1
    seed: int = 0
    position: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside world size {self.world_size}")
        self._perm_epoch = -1
        self._perm = np.empty(0, dtype=np.int64)

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n_samples)
            self._perm_epoch = epoch
        return self._perm

    def indices_at(self, position: int, count: int) -> list[int]:
        """``count`` sample ids starting at global ``position`` (crossing epochs as needed)."""
        out = []
        for p in range(position, position + count):
            epoch, off = divmod(p, self.n_samples)
            out.append(int(self._permutation(epoch)[off]))
        return out

    def next_batch(self) -> list[int]:
        """This rank's sample ids for the next step; advances the global position."""
        start = self.position + self.rank * self.micro_batch_size
        ids = self.indices_at(start, self.micro_batch_size)
        self.position += self.micro_batch_size * self.world_size
        return ids

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position, "seed": self.seed, "n_samples": self.n_samples}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["seed"]) != self.seed or int(state["n_samples"]) != self.n_samples:
            raise ValueError(
                f"sampler state is for seed {state['seed']} / {state['n_samples']} samples, "
                f"this run has seed {self.seed} / {self.n_samples} samples (different data?)"
            )
        self.position = int(state["position"])
