"""Whether a model size's training state fits the memory each rank has, before anything is built.

FSDP shards a rank's share of the state: fp32 weights, fp32 gradients and AdamW's two fp32 moments, 16 bytes a
parameter over the world. A rank whose share alone exceeds its device would fail only after its set-up (a CUDA
out-of-memory error in the model's materialization or the first optimizer step, 30 s and more into the run at 8B),
and under a launcher that restarts it, again and again. :func:`fit_problem` says so first, with the smallest world
that could hold it. Activations, the gathered layer and the memory tier's staging buffer need room beyond the share
(:data:`USABLE`), so a world that passes can still run out of memory at a large micro-batch; one that fails cannot
run.

Torch-free: the caller passes the device's memory.
"""

from __future__ import annotations

import math

from training.model.shapes import DEFAULT_VOCAB, MODEL_SIZES, param_count

#: Bytes of training state per parameter, sharded over the world: fp32 weights, fp32 gradients, two AdamW moments.
TRAINING_BYTES_PER_PARAM = 16
#: The share of a device the sharded state may take (the rest: activations, the gathered layer, the CUDA context).
USABLE = 0.9


def state_bytes_per_rank(size: str, world: int) -> int:
    """One rank's share of the training state of model ``size`` over ``world`` ranks."""
    return math.ceil(TRAINING_BYTES_PER_PARAM * param_count(MODEL_SIZES[size], DEFAULT_VOCAB[size]) / world)


def fit_problem(size: str, world: int, device_bytes: int, device: str) -> str | None:
    """Why model ``size`` cannot train on ``world`` ranks of ``device_bytes`` each (``device`` names it in the
    message), or None when its share fits within :data:`USABLE` of the device."""
    if size not in MODEL_SIZES or world < 1 or device_bytes <= 0:
        return None
    need = state_bytes_per_rank(size, world)
    room = USABLE * device_bytes
    if need <= room:
        return None
    params = param_count(MODEL_SIZES[size], DEFAULT_VOCAB[size])
    least = math.ceil(TRAINING_BYTES_PER_PARAM * params / room)
    return (
        f"model.size {size}: {params / 1e9:.2f} billion parameters need {need / 1e9:.1f} GB of training state per "
        f"rank at WORLD_SIZE {world} (fp32 weights, gradients and AdamW's two moments: {TRAINING_BYTES_PER_PARAM} "
        f"bytes a parameter, sharded by FSDP), more than {USABLE:.0%} of {device} ({device_bytes / 2**30:.1f} GiB): "
        f"it needs at least {least} ranks of that memory (--nproc, --nodes), or a smaller model.size"
    )
