"""The memory tier's fingerprint (``training.checkpoint.fingerprint``) against a plain-Python reference and known
digests."""

from __future__ import annotations

import random

import pytest
import torch

from training.checkpoint.fingerprint import COLS, fingerprint, reference


def _buf(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def test_known_digests() -> None:
    assert fingerprint(_buf(bytes(64))) == "0" * 32
    # one word of value 1 at index 0: S = 1, F = (2*0 + 1) * 1 = 1
    assert fingerprint(_buf(b"\x01" + bytes(63))) == "0000000000000001" + "0000000000000001"
    # the same word at index 3: S = 1, F = 2*3 + 1 = 7
    assert fingerprint(_buf(bytes(24) + b"\x01" + bytes(7))) == "0000000000000001" + "0000000000000007"
    # all bits set in two words: S = 2 * (2**64 - 1) mod 2**64, F = (1 + 3) * (2**64 - 1) mod 2**64
    assert fingerprint(_buf(b"\xff" * 16)) == "fffffffffffffffe" + "fffffffffffffffc"


@pytest.mark.parametrize("words", [1, 7, COLS, COLS + 1, 3 * COLS + 5])
def test_matches_the_reference_across_full_rows_and_a_tail(words: int) -> None:
    rng = random.Random(words)
    data = bytes(rng.getrandbits(8) for _ in range(8 * words))
    assert fingerprint(_buf(data)) == reference(data)


def test_any_single_flipped_bit_changes_it() -> None:
    rng = random.Random(7)
    data = bytearray(rng.getrandbits(8) for _ in range(8 * (2 * COLS + 3)))
    before = fingerprint(_buf(bytes(data)))
    for _ in range(40):
        i, bit = rng.randrange(len(data)), rng.randrange(8)
        flipped = bytearray(data)
        flipped[i] ^= 1 << bit
        assert fingerprint(_buf(bytes(flipped))) != before


def test_swapped_words_change_it() -> None:
    """A plain sum would not see two words trade places; the position weights do."""
    a, b = (5).to_bytes(8, "little"), (9).to_bytes(8, "little")
    assert fingerprint(_buf(a + b))[16:] != fingerprint(_buf(b + a))[16:]
    assert fingerprint(_buf(a + b))[:16] == fingerprint(_buf(b + a))[:16]


def test_refuses_a_length_that_is_not_whole_words() -> None:
    with pytest.raises(ValueError, match="multiple of 8 bytes"):
        fingerprint(_buf(bytes(12)))
