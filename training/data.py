"""Tokenizer, offline corpus, memory-mapped token shards and the resumable data-parallel sampler.

Shard layout of a data directory::

    index.json          {"format": 1, "dtype": "uint16", "vocab_size": V, "splits": {"train": [...], "val": [...]}}
    train_00000.bin     uint16 tokens, documents separated by EOS
    val_00000.bin

Every split entry is ``{"file": name, "tokens": n}``. Shards are read with ``numpy.memmap`` so many
ranks can share one copy on a shared file system.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

INDEX_FILE = "index.json"
DTYPE = np.uint16
FORMAT_VERSION = 1


class ByteTokenizer:
    """Bytes 0-255 map to themselves; specials follow. ``vocab_size`` is padded to a multiple of 8."""

    BOS = 256
    EOS = 257
    PAD = 258
    vocab_size = 264

    def encode(self, text: str, *, bos: bool = False, eos: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        return ([self.BOS] if bos else []) + ids + ([self.EOS] if eos else [])

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


TOKENIZER = ByteTokenizer()

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


def write_shards(
    out_dir: str | os.PathLike[str],
    documents: Iterable[str],
    *,
    split: str,
    shard_tokens: int = 1 << 22,
    tokenizer: ByteTokenizer = TOKENIZER,
) -> list[dict[str, Any]]:
    """Tokenize ``documents`` into ``<split>_NNNNN.bin`` files of at most ``shard_tokens`` tokens each."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    buf: list[int] = []

    def flush() -> None:
        name = f"{split}_{len(entries):05d}.bin"
        arr = np.asarray(buf, dtype=DTYPE)
        tmp = out / (name + ".tmp")
        arr.tofile(tmp)
        os.replace(tmp, out / name)
        entries.append({"file": name, "tokens": int(arr.size)})
        buf.clear()

    for doc in documents:
        buf.extend(tokenizer.encode(doc))
        while len(buf) >= shard_tokens:
            rest = buf[shard_tokens:]
            del buf[shard_tokens:]
            flush()
            buf.extend(rest)
    if buf or not entries:
        flush()
    return entries


def write_index(out_dir: str | os.PathLike[str], splits: dict[str, list[dict[str, Any]]], vocab_size: int) -> Path:
    """Write ``index.json`` atomically (readers treat its presence as "data ready")."""
    path = Path(out_dir) / INDEX_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(
        json.dumps({"format": FORMAT_VERSION, "dtype": "uint16", "vocab_size": vocab_size, "splits": splits})
    )
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
            raise FileNotFoundError(f"no {INDEX_FILE} in {self.dir}; run `python -m training.prepare_data` first")
        index = json.loads(index_path.read_text())
        if split not in index["splits"]:
            raise KeyError(f"split {split!r} not in {index_path} (has {', '.join(index['splits'])})")
        self.vocab_size = int(index["vocab_size"])
        self.seq_len = seq_len
        self._maps: list[np.memmap] = []
        self._starts: list[int] = []  # first window id of each shard
        total = 0
        for entry in index["splits"][split]:
            mm = np.memmap(self.dir / entry["file"], dtype=DTYPE, mode="r")
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
