"""A 128-bit fingerprint of a byte buffer that the GPU computes in milliseconds and the CPU gets bit for bit.

The memory tier checks every snapshot it loads against the fingerprint taken when it was written. sha256 over the
11 GB of a 1B model's state takes over a second on four CPU cores, longer than the whole restore may take; this
fingerprint is two reductions over the buffer read as 64-bit words ``w_i``:

* ``S = sum(w_i)`` and
* ``F = sum((2 i + 1) w_i)``,

both modulo 2**64 (torch's int64 arithmetic wraps), so the order in which a device sums does not matter: a CUDA and
a CPU tensor of the same bytes give the same digest. Every weight is odd, so any single flipped bit changes ``F``;
a torn buffer (part of one snapshot, part of another) or a shifted copy changes it with probability ``1 - 2**-64``.
It guards against torn, truncated and damaged copies, not against someone forging a buffer: the slot's meta, which
carries it, has its own sha256 (:mod:`training.checkpoint.hostbuf`).

``F`` is computed without a weight per word: with the words as a ``rows x COLS`` matrix ``W`` (``i = r COLS + k``),
``F = 2 COLS sum_r r rowsum_r + sum_k (2 k + 1) colsum_k``; the few words past the last full row are added on their
own.
"""

from __future__ import annotations

import torch

#: Columns of the matrix the words are summed as (each reduction reads the buffer once).
COLS = 4096
_MASK = (1 << 64) - 1


def _weighted(values: torch.Tensor, first_index: int) -> torch.Tensor:
    """sum((2 (first_index + j) + 1) v_j) over a 1-D int64 tensor, wrapping."""
    j = torch.arange(values.numel(), dtype=torch.int64, device=values.device)
    return ((2 * j + (2 * first_index + 1)) * values).sum()


def fingerprint_parts(buf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(S, F)`` of a uint8 buffer whose length is a multiple of 8, as int64 scalars on its device (asynchronous on
    CUDA: on the current stream)."""
    if buf.dtype != torch.uint8 or buf.dim() != 1 or buf.numel() % 8:
        raise ValueError(f"fingerprint needs a 1-D uint8 buffer of a multiple of 8 bytes, got {buf.dtype} {buf.shape}")
    words = buf.view(torch.int64)
    rows = words.numel() // COLS
    full = words[: rows * COLS].view(rows, COLS)
    tail = words[rows * COLS :]
    zero = torch.zeros((), dtype=torch.int64, device=buf.device)
    total, weighted = zero.clone(), zero.clone()
    if rows:
        row_sums = full.sum(dim=1)
        col_sums = full.sum(dim=0)
        total = total + row_sums.sum()
        r = torch.arange(rows, dtype=torch.int64, device=buf.device)
        weighted = weighted + 2 * COLS * (r * row_sums).sum() + _weighted(col_sums, 0)
    if tail.numel():
        total = total + tail.sum()
        weighted = weighted + _weighted(tail, rows * COLS)
    return total, weighted


def digest(parts: tuple[torch.Tensor, torch.Tensor]) -> str:
    """The hex digest of :func:`fingerprint_parts`' result (waits for the device)."""
    total, weighted = (int(t.item()) & _MASK for t in parts)
    return f"{total:016x}{weighted:016x}"


def fingerprint(buf: torch.Tensor) -> str:
    """The 32-hex-digit fingerprint of ``buf`` (see the module docstring)."""
    return digest(fingerprint_parts(buf))


def reference(data: bytes) -> str:
    """The same fingerprint in plain Python (slow): what the tests compare :func:`fingerprint` with."""
    words = [int.from_bytes(data[i : i + 8], "little", signed=False) for i in range(0, len(data), 8)]
    total = sum(words) & _MASK
    weighted = sum((2 * i + 1) * w for i, w in enumerate(words)) & _MASK
    return f"{total:016x}{weighted:016x}"
