"""The flat layout of a memory-tier snapshot (``training.checkpoint.snapshot``), with hand-computed offsets."""

from __future__ import annotations

import pickle

import torch

from training.checkpoint.snapshot import TensorRef, copy_in, copy_out, layout_of, rebuild, split


def _state() -> dict:
    return {
        "model": {"w": torch.tensor([1.0, 2.0, 3.0]), "n": torch.tensor([7, 8], dtype=torch.int64)},
        "optim": {"param_groups": [{"lr": 0.5, "params": ["w"]}], "flag": torch.tensor([True])},
        "step": 4,
        "blob": b"rng",
    }


def test_layout_places_tensors_back_to_back_64_byte_aligned() -> None:
    layout = layout_of(split(_state()))
    # w: 3 x 4 bytes at 0; n: 2 x 8 bytes at 64; flag: 1 byte at 128; 192 bytes in all
    assert [(e.key, e.dtype, e.shape, e.offset, e.nbytes) for e in layout.entries] == [
        (".model.w", "float32", (3,), 0, 12),
        (".model.n", "int64", (2,), 64, 16),
        (".optim.flag", "bool", (1,), 128, 1),
    ]
    assert layout.nbytes == 192


def test_the_signature_follows_keys_dtypes_and_shapes_not_values() -> None:
    a = layout_of(split(_state())).signature
    changed = _state()
    changed["model"]["w"] += 1
    assert layout_of(split(changed)).signature == a
    changed["model"]["w"] = torch.zeros(4)
    assert layout_of(split(changed)).signature != a


def test_a_snapshot_round_trips_through_the_buffer_and_the_pickled_skeleton() -> None:
    src = split(_state())
    layout = layout_of(src)
    buf = torch.zeros(layout.nbytes, dtype=torch.uint8)
    copy_in(buf, layout, src)
    assert buf[:12].view(torch.float32).tolist() == [1.0, 2.0, 3.0] and buf[64:80].view(torch.int64).tolist() == [7, 8]
    skeleton = pickle.loads(pickle.dumps(src.skeleton))
    assert skeleton["step"] == 4 and skeleton["blob"] == b"rng" and isinstance(skeleton["model"]["w"], TensorRef)

    dst = split({"model": {"w": torch.zeros(3), "n": torch.zeros(2, dtype=torch.int64)},
                 "optim": {"param_groups": [{"lr": 0.0, "params": ["w"]}], "flag": torch.tensor([False])},
                 "step": 0, "blob": b""})  # fmt: skip
    copy_out(buf, layout, dst)
    restored = rebuild(skeleton, dst.objects)
    assert restored["model"]["w"] is dst.objects[0]  # the live tensors, filled in place
    assert restored["model"]["w"].tolist() == [1.0, 2.0, 3.0] and restored["model"]["n"].tolist() == [7, 8]
    assert restored["optim"]["flag"].tolist() == [True] and restored["optim"]["param_groups"][0]["lr"] == 0.5


def test_the_snapshot_size_known_before_the_optimizer_state_is_that_of_the_state_after_a_step() -> None:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from training.checkpoint.snapshot import adamw_snapshot_bytes

    model = torch.nn.Sequential(torch.nn.Embedding(11, 6), torch.nn.Linear(6, 5), torch.nn.Linear(5, 3, bias=False))
    before = adamw_snapshot_bytes([p.shape for p in model.parameters()], world=1)
    # weight, two moments (each aligned to 64) and a 64-byte step per parameter: 66, 30, 5 and 15 floats
    assert before == sum(3 * -(-n * 4 // 64) * 64 + 64 for n in (66, 30, 5, 15)) == 1984
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.tensor([1, 2])).sum().backward()
    optimizer.step()
    msd, osd = get_state_dict(model, optimizer)
    assert layout_of(split({"model": msd, "optim": osd})).nbytes == before


def test_the_snapshot_size_of_shards_is_an_upper_bound_over_ranks_with_uneven_rows() -> None:
    from training.checkpoint.snapshot import adamw_snapshot_bytes

    params = [(10, 16), (7,)]
    # world 4: at most 3 of 10 rows (48 floats: 192 bytes) and 2 of 7 elements (8 bytes, 64 aligned)
    assert adamw_snapshot_bytes(params, world=4) == (3 * 192 + 64) + (3 * 64 + 64)
    assert adamw_snapshot_bytes(params, world=1) == (3 * 640 + 64) + (3 * 64 + 64)
