"""Tokenize a text corpus (or the generated offline corpus) into memory-mapped shards.

    python -m training.data.prepare --out DIR --generate 8            # 8 MB of project-generated text
    python -m training.data.prepare --out DIR --source /data/c4/en    # *.txt, *.json / *.jsonl (C4: "text"), *.gz
    python -m training.data.prepare --out DIR --source /data/c4/en --tokenizer /models/Llama-3.1-8B

Without ``--tokenizer`` text is byte-tokenized (vocabulary 264). ``--tokenizer PATH`` takes a Hugging Face
``tokenizer.json`` or a directory holding one; its EOS token comes from the ``tokenizer_config.json`` next to it,
or ``--eos-token``. Shards are uint16, or uint32 for vocabularies above 65,536 tokens (``dtype`` in index.json).
Every ``--val-every``-th document goes to the ``val`` split, the rest to ``train``. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from training.data.dataset import (
    ENCODE_BATCH,
    TOKENIZER,
    HFTokenizer,
    ShardWriter,
    Tokenizer,
    generate_corpus,
    write_index,
)

TEXT_SUFFIXES = (".txt", ".json", ".jsonl")


def source_files(sources: list[str]) -> list[Path]:
    """Text/JSON files named directly or found (recursively, sorted) under directories."""
    files: list[Path] = []
    for s in sources:
        p = Path(s)
        if p.is_dir():
            files += sorted(
                f for f in p.rglob("*") if f.is_file() and f.name.removesuffix(".gz").endswith(TEXT_SUFFIXES)
            )
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"source {s} does not exist")
    if not files:
        raise FileNotFoundError(f"no {'/'.join(TEXT_SUFFIXES)} files (optionally .gz) in {', '.join(sources)}")
    return files


def read_documents(path: Path) -> Iterator[str]:
    """Documents of one file: JSON lines use the ``text`` field (C4 layout); text files are split on blank lines."""
    opener = gzip.open if path.suffix == ".gz" else open
    name = path.name.removesuffix(".gz")
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        if name.endswith((".json", ".jsonl")):
            for line in fh:
                if line.strip():
                    yield json.loads(line)["text"]
        else:
            doc: list[str] = []
            for line in fh:
                if line.strip():
                    doc.append(line.rstrip("\n"))
                elif doc:
                    yield "\n".join(doc)
                    doc = []
            if doc:
                yield "\n".join(doc)


class _Progress:
    def __init__(self, label: str, total_bytes: int | None) -> None:
        self.label, self.total, self.done, self.t0, self.last = label, total_bytes, 0, time.monotonic(), 0.0

    def __call__(self, docs: Iterable[str]) -> Iterator[str]:
        for d in docs:
            self.done += len(d) + 1
            now = time.monotonic()
            if now - self.last > 1.0:
                self.last = now
                pct = f" {100 * self.done / self.total:5.1f}%" if self.total else ""
                rate = self.done / max(now - self.t0, 1e-9) / 1e6
                print(
                    f"\r[prepare_data] {self.label}{pct} {self.done / 1e6:.1f} MB ({rate:.1f} MB/s)",
                    end="",
                    file=sys.stderr,
                )
            yield d
        print(f"\r[prepare_data] {self.label} done: {self.done / 1e6:.1f} MB", file=sys.stderr)


def prepare(
    out: Path, docs: Iterable[str], *, val_every: int, shard_tokens: int, tokenizer: Tokenizer = TOKENIZER
) -> dict[str, int]:
    """Write train/val shards + ``index.json`` in one pass over ``docs`` (every ``val_every``-th document goes to
    val; without any, the last train document is also val); returns tokens per split."""
    writers = {
        split: ShardWriter(out, split=split, shard_tokens=shard_tokens, tokenizer=tokenizer)
        for split in ("train", "val")
    }
    batches: dict[str, list[str]] = {"train": [], "val": []}
    last_train: str | None = None
    for i, doc in enumerate(docs):
        split = "val" if val_every and i % val_every == val_every - 1 else "train"
        batches[split].append(doc)
        if split == "train":
            last_train = doc
        if len(batches[split]) >= ENCODE_BATCH:
            writers[split].add(batches[split])
            batches[split] = []
    for split, batch in batches.items():
        if batch:
            writers[split].add(batch)
    if writers["val"].documents == 0 and last_train is not None:
        writers["val"].add([last_train])
    splits = {split: writer.close() for split, writer in writers.items()}
    write_index(out, splits, tokenizer.vocab_size, tokenizer=tokenizer.info())
    return {k: sum(e["tokens"] for e in v) for k, v in splits.items()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (the dataset-preparation Job in charts/dataset_job.py builds it)."""
    p = argparse.ArgumentParser(prog="python -m training.data.prepare", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="output data directory (index.json + *.bin)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", nargs="+", help="text / JSON-lines files or directories (e.g. a C4 subset)")
    src.add_argument("--generate", type=float, metavar="N_MB", help="generate N MB of offline text instead")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated corpus")
    p.add_argument("--val-every", type=int, default=100, help="every N-th document goes to val (0 = none)")
    p.add_argument("--shard-tokens", type=int, default=1 << 26, help="tokens per shard file (uint16 or uint32)")
    p.add_argument(
        "--tokenizer",
        type=Path,
        metavar="PATH",
        help="Hugging Face tokenizer.json, or a directory holding one (a model repo); default: bytes",
    )
    p.add_argument(
        "--eos-token",
        metavar="TEXT",
        help="EOS token between documents (with --tokenizer; default: eos_token of tokenizer_config.json)",
    )
    args = p.parse_args(argv)
    if args.eos_token is not None and args.tokenizer is None:
        p.error("--eos-token needs --tokenizer")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tokenizer: Tokenizer = TOKENIZER
    if args.tokenizer is not None:
        tokenizer = hf = HFTokenizer(args.tokenizer, eos_token=args.eos_token)
        print(f"[prepare_data] tokenizer {hf.path}: vocab {hf.vocab_size}, EOS id {hf.EOS}", file=sys.stderr)
    if args.generate is not None:
        n = int(args.generate * 1e6)
        docs: Iterable[str] = _Progress("generate", n)(generate_corpus(n, args.seed))
    else:
        files = source_files(args.source)
        total = sum(f.stat().st_size for f in files)

        def all_docs() -> Iterator[str]:
            for f in files:
                yield from read_documents(f)

        docs = _Progress(f"{len(files)} files", total)(all_docs())
    counts = prepare(args.out, docs, val_every=args.val_every, shard_tokens=args.shard_tokens, tokenizer=tokenizer)
    print(f"[prepare_data] wrote {counts['train']} train and {counts['val']} val tokens to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
