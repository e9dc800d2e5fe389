"""What is trained and how (``model``, ``train``, ``checkpoint``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from platform_config.schema.base import _Strict


class ModelConfig(_Strict):
    """The Llama-style decoder."""

    size: Literal["tiny", "small", "1b", "llama3-8b"] = "tiny"
    #: A local Hugging Face Llama directory (``config.json`` + ``*.safetensors``, e.g. on FSx): its shape replaces
    #: ``size``, and its weights start a run that has no committed checkpoint (training/model/hf_checkpoint.py).
    hf_checkpoint: str | None = None


class TrainConfig(_Strict):
    """Optimisation hyper-parameters."""

    steps: int = Field(default=200, ge=1)
    seq_len: int = Field(default=128, ge=8)
    micro_batch_size: int = Field(default=4, ge=1)
    lr: float = Field(default=3e-3, gt=0)
    min_lr: float = Field(default=3e-4, ge=0)
    warmup_steps: int = Field(default=20, ge=0)
    weight_decay: float = Field(default=0.1, ge=0)
    grad_clip: float = Field(default=1.0, gt=0)
    seed: int = 1234
    eval_interval: int = Field(default=50, ge=0, description="0 = no evaluation")
    eval_batches: int = Field(default=2, ge=1)
    data_dir: str | None = Field(default=None, description="tokenized shards; None = generate the offline corpus")
    #: Raw text for the dataset-preparation Job (text / JSON-lines files or a directory on the shared file system,
    #: e.g. a C4 subset copied to FSx). None = the Job writes the project's generated corpus instead.
    corpus_source: str | None = None
    #: Size of the generated corpus (MB) when ``corpus_source`` is unset.
    generated_corpus_mb: float = Field(default=64.0, gt=0)


class CheckpointConfig(_Strict):
    """Checkpoint cadence and retention (mode comes from the recovery mode)."""

    interval_steps: int = Field(default=25, ge=1)
    #: Steps between host-memory snapshots (the memory tier: page-locked host buffers backed by ``/dev/shm``, each
    #: rank's snapshot also copied to a rank on the next node). An in-process restart, an ft_launcher restart and a
    #: lost node (while one replica survives) roll back at most this many steps instead of to the last storage
    #: checkpoint. ``auto`` (the default): the smallest interval whose measured cost to the training loop stays within
    #: ``memory_overhead_budget``, re-decided as step time and snapshot cost move, at most ``interval_steps``
    #: (training/checkpoint/memory_interval.py; the log says which interval and why). 0 = off (storage only); always
    #: off in mode ``k8s-only`` (the published baseline). Host memory per rank: 4 x its shard of the state (2 own
    #: slots, 2 peer).
    memory_interval_steps: Annotated[int, Field(ge=0)] | Literal["auto"] = "auto"
    #: The share of the training loop's time the ``auto`` memory interval may spend on snapshots.
    memory_overhead_budget: float = Field(default=0.01, gt=0, le=0.5)
    keep_last: int = Field(default=3, ge=1)
    #: Consecutive failed storage saves (a full or failing file system) after which the run stops with exit 21
    #: (``CHECKPOINT_WRITE``), keeping the newest memory-tier snapshot. A failed save is not a training fault: the
    #: live state is fine, so training goes on and the save is tried again at the next interval.
    max_failed_saves: int = Field(default=3, ge=1)
    #: Root directory for checkpoints; None = ``<run_dir>/checkpoints`` locally, the FSx mount on Kubernetes.
    dir: str | None = None
    #: How NVRx's async path (CUDA only) hands GPU tensors to its writer process: ``cuda-ipc`` (NVRx's default:
    #: handles of the live tensors, the loop waits for the worker's copy to host), ``cuda-copy`` (a copy made on the
    #: GPU first, whose handles the worker copies to host while training goes on; ``cuda-ipc`` where the GPU has no
    #: room for it, said once; not yet measured on a GPU), ``cpu-shm`` (the trainer copies into shared host memory;
    #: no CUDA in the worker); ``-cached`` reuses handles/buffers across saves. See docs/benchmarks.md for the stall
    #: of each.
    nvrx_staging: Literal["cuda-ipc", "cuda-copy", "cuda-ipc-cached", "cpu-shm", "cpu-shm-cached"] = "cuda-ipc"
    #: Writer processes per rank in NVRx's async path (its ``thread_count``: one file and one forked writer each,
    #: so a rank's share is written in parallel); the commit hashes those files in as many threads. 4: a 1B
    #: checkpoint (11.7 GB) committed in 12.3-13.0 s on an H200 host, against 28.5-32.8 s with 1 (docs/benchmarks.md).
    write_threads: int = Field(default=4, ge=1, le=32)
