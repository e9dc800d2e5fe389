"""The training loop: FSDP2 model, AdamW with warmup + cosine LR, resumable data, checkpoints, hooks.

``torch.distributed`` must be initialised by the caller (``training.train`` / tests); the trainer never
creates or destroys process groups, so an in-process restart can rebuild it on a fresh group.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.checkpoint.stateful import Stateful

from platform_config.schema import ProjectConfig
from training.checkpoint import host_slots
from training.checkpoint.errors import CheckpointWriteError, CheckpointWriteOverdueError, MarkerReadError
from training.checkpoint.files import list_committed
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.memtier import holds_snapshot
from training.checkpoint.shm_scope import scope_dir
from training.checkpoint.snapshot import adamw_snapshot_bytes
from training.checkpoint.state import AppState, state_digest
from training.data.dataset import TOKENIZER, ResumableSampler, TokenShards, ensure_generated_corpus
from training.model.hf_checkpoint import HFCheckpointError, load_hf_weights, read_hf_config, tokenizer_mismatch
from training.model.llama import ModelArgs, build_model, flops_per_token
from training.model.shapes import MODEL_SIZES, param_shapes
from training.parallel.distributed import (
    any_rank,
    apply_fsdp,
    checkpoint_timeout_s,
    clip_grad_norm_,
    device,
    set_determinism,
)
from training.resilience import final_save, sigterm
from training.resilience.exit_codes import UnrecoverableError, classify
from training.resilience.ft_monitor import under_ft_launcher
from training.resilience.timeout_check import checkpoint_wait_s
from training.telemetry.events import EventLog
from training.telemetry.metrics import StepTimer, peak_flops_per_device

#: Size of the generated offline corpus (bytes = tokens) when ``train.data_dir`` is unset.
GENERATED_CORPUS_BYTES = 1 << 20
#: A SIGTERMed rank must reach the step's end (the agreement) within this many of its longest steps, or 10 s: else a
#: peer is gone and no agreement comes (``training.resilience.sigterm.overdue``).
STOP_BOUNDARY_STEPS, STOP_BOUNDARY_MIN_S = 3.0, 10.0


class TrainerHooks(Protocol):
    """Callbacks into the resilience layer (fault injection, ft_launcher monitor, extra checkpoint state)."""

    def fault_point(self, phase: str, step: int) -> None: ...

    def section(self, name: str) -> ContextManager[None]: ...

    def heartbeat(self, step: int) -> None: ...

    def extra_state(self) -> dict[str, Stateful]: ...


class NullHooks:
    """Hooks that do nothing."""

    def fault_point(self, phase: str, step: int) -> None:
        return None

    def section(self, name: str) -> ContextManager[None]:
        return contextlib.nullcontext()

    def heartbeat(self, step: int) -> None:
        return None

    def extra_state(self) -> dict[str, Stateful]:
        return {}


def lr_at(step: int, *, lr: float, min_lr: float, warmup: int, total: int) -> float:
    """Learning rate for optimizer step ``step`` (1-based): linear warmup, then cosine decay to ``min_lr``."""
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class ModelSpec:
    size: str
    vocab: int
    max_seq_len: int
    hf_args: ModelArgs | None
    seed: int


def initialised_model(spec: ModelSpec) -> torch.nn.Module:
    """The full model on the CPU with its seeded initial weights (identical on every rank, before sharding)."""
    torch.manual_seed(spec.seed)
    return build_model(spec.size, spec.vocab, max_seq_len=spec.max_seq_len, args=spec.hf_args)


def sharded_model(spec: ModelSpec, dev: torch.device, *, on_meta: bool) -> torch.nn.Module:
    """The FSDP2-sharded model on ``dev``: initialised, or (``on_meta``) built on the meta device and allocated
    uninitialised, the RoPE tables recomputed, for a restore to fill."""
    if not on_meta:
        return apply_fsdp(initialised_model(spec), dev)
    with torch.device("meta"):
        model = build_model(spec.size, spec.vocab, max_seq_len=spec.max_seq_len, args=spec.hf_args)
    model = apply_fsdp(model, dev)
    model.init_rope()
    return model


def adamw(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """The model's optimizer. Fused (torchtitan's default): one op for the whole update; foreach's ~10 list ops each
    cost a new process DTensor's sharding propagation in its first step (0.2 of the tiny model's 0.4 CPU-s)."""
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay, fused=True)


def begin_memory_slots(root: Path, rank: int, world: int, spec: ModelSpec, events: EventLog) -> None:
    """Start readying this rank's memory-tier host slots before the model is built (a fresh start: page-locking
    then overlaps the set-up, not the training steps), sized for the snapshot of the model ``spec`` and its AdamW
    state over ``world`` ranks (see :mod:`training.checkpoint.host_slots`)."""
    shapes = param_shapes(spec.hf_args or MODEL_SIZES[spec.size], spec.vocab)  # no model built: milliseconds
    host_slots.begin(scope_dir(root), rank, adamw_snapshot_bytes(shapes, world), events)


def hf_model_args(path: str | None, data: TokenShards, rank: int) -> ModelArgs | None:
    """The shape of the Hugging Face checkpoint ``path`` (None without one); its vocabulary must cover ``data``'s."""
    if not path:
        return None
    args = read_hf_config(path)
    if data.vocab_size > args.vocab_size:
        raise HFCheckpointError(
            f"the data's vocabulary ({data.vocab_size} tokens) is larger than the model's in {path} "
            f"({args.vocab_size}): tokenize with that model's tokenizer (prepare_data --tokenizer)"
        )
    if rank == 0:
        print(f"[trainer] model shape from {path}/config.json (model.size is not used)", flush=True)
        mismatch = tokenizer_mismatch(data.tokenizer, path)
        if mismatch:
            print(
                f"[trainer] WARNING: {mismatch}; the weights in {path} will read meaningless tokens. "
                f"Prepare the data with: python -m training.data.prepare --tokenizer {path} ...",
                flush=True,
            )
    return args


def committed_checkpoint_exists(root: Path) -> bool:
    """Whether the restore will find a committed checkpoint. A marker that cannot be read counts as none here: the
    model is initialised, and the restore reports the marker."""
    try:
        return bool(list_committed(root))
    except MarkerReadError:
        return False


class StorageProgress:
    """What storage holds of one attempt's training, and its storage saves (inside section ``checkpoint``).

    A step counts as checkpointed only once storage holds it committed or this attempt saved it: a step restored
    from the memory tier does not, so the target step is saved even when it was restored (issue 48). A failed
    storage save is not a training fault: the live state is fine. Training goes on, the save is tried again at the
    next interval (the failed save's directory removed first), and after ``checkpoint.max_failed_saves`` failures in
    a row the run stops with the storage exit code (21), keeping the newest memory-tier snapshot. A save another rank
    was lost in, or a write past the checkpoint section (:class:`CheckpointWriteOverdueError`), still goes to the
    restart layers. Every rank raises a failed save together, so every rank counts it.
    """

    def __init__(self, ckpt: CheckpointManager, hooks: TrainerHooks, max_failed: int, rank: int) -> None:
        self.ckpt, self.hooks, self.max_failed, self.rank = ckpt, hooks, max_failed, rank
        #: The newest step that storage holds committed, or that this attempt saved (a final save is needed when
        #: training went beyond it).
        self.checkpointed = 0
        #: The newest step that storage holds committed, as far as this attempt knows.
        self.committed = 0
        #: Storage saves that failed in a row.
        self.failed = 0
        #: Seconds the newest committed save of this attempt took, begin to commit (seen at a step's poll; None: none).
        self.last_save_s: float | None = None
        self._begun: dict[int, float] = {}

    def restored(self, step: int) -> None:
        """The restore gave ``step``: from storage, or from the memory tier (maybe newer than storage)."""
        committed = self.ckpt.latest_committed() if step else None
        self.checkpointed = self.committed = min(step, committed or 0)

    def poll(self, step: int) -> None:
        """Every step (see :meth:`CheckpointManager.maybe_finalize`). Collective."""
        with self.guard(step):
            self.ckpt.maybe_finalize()

    def save(self, step: int, state: AppState) -> None:
        """Checkpoint ``state`` as step ``step``. Collective."""
        with self.hooks.section("checkpoint"), self.guard(step):
            self._begun[step] = time.monotonic()
            self.ckpt.save(step, state, during_write=lambda s: self.hooks.fault_point("checkpoint", s))
            self.checkpointed = step

    def finish(self, step: int) -> None:
        """Wait for the save in flight to commit (with the manager's keep-alive where it has one). Collective."""
        with self.hooks.section("checkpoint"), self.guard(step):
            if self.ckpt.keepalive is not None:
                self.ckpt.drain(*self.ckpt.keepalive)
            else:
                self.ckpt.wait()

    def save_target(self, step: int, state: AppState) -> None:
        """Save ``step`` (again) until storage holds it committed. Collective."""
        while True:
            if step > self.checkpointed:  # steps not a multiple of the interval, or a failed save
                self.save(step, state)
            self.finish(step)
            if step <= self.checkpointed:
                return

    @contextlib.contextmanager
    def guard(self, step: int) -> Iterator[None]:
        """Count a failed save raised inside (at training step ``step``) instead of raising it (see the class)."""
        try:
            yield
        except CheckpointWriteError as exc:
            if isinstance(exc, CheckpointWriteOverdueError) or classify(exc) != "checkpoint_write":
                raise
            self.failed += 1
            self.checkpointed = self.committed
            if self.failed >= self.max_failed:
                raise UnrecoverableError(
                    f"{self.failed} consecutive saves failed (checkpoint.max_failed_saves = {self.max_failed}), the "
                    f"last: {exc}; the newest memory-tier snapshot is kept",
                    cause="checkpoint_write",
                ) from exc
            self.ckpt.save_failed(step)
            if self.rank == 0:
                print(
                    f"[trainer] a failed save is not a training fault: training goes on from the live state at step "
                    f"{step}; the save is tried again at the next interval ({self.failed} of {self.max_failed} "
                    "failed in a row)",
                    flush=True,
                )
        else:
            committed = self.ckpt.committed_step
            if committed is not None and committed > self.committed:
                self.committed, self.failed = committed, 0
                begun = self._begun.get(committed)
                if begun is not None:
                    self.last_save_s = time.monotonic() - begun
                self._begun = {k: t for k, t in self._begun.items() if k > committed}


class Trainer:
    """One training attempt of one rank. Call :meth:`setup`, :meth:`restore`, :meth:`train`, then :meth:`close`."""

    def __init__(
        self,
        cfg: ProjectConfig,
        run_dir: Path,
        events: EventLog,
        *,
        checkpoint_mode: str,
        memory_tier: bool = True,
        target_steps: int | None = None,
        hooks: TrainerHooks | None = None,
        allow_fresh_start: bool = False,
        final_checkpoint: bool = True,
    ) -> None:
        """``memory_tier``: the mode's ``ModeLayers.memory_tier`` (off: storage only). ``final_checkpoint``: save the
        target step when the interval does not land on it (off for a benchmark's no-checkpoint baseline)."""
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.events = events
        self.checkpoint_mode = checkpoint_mode
        self.memory_interval_steps = cfg.checkpoint.memory_interval_steps if memory_tier else 0
        self.target_steps = target_steps if target_steps is not None else cfg.train.steps
        self.hooks: TrainerHooks = hooks or NullHooks()
        self.allow_fresh_start = allow_fresh_start
        self.final_checkpoint = final_checkpoint
        self.step = 0
        self._losses: dict[int, float] = {}
        self.eval_losses: dict[int, float] = {}
        self._failed = self._closed = False
        self.ckpt: CheckpointManager | None = None
        self.progress: StorageProgress | None = None
        #: Ranks that had a SIGTERM by the newest step's end (agreed: :func:`~training.resilience.final_save.stop`).
        self.stopping = 0

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Build data, model (FSDP2), optimizer and the checkpoint manager. Collective."""
        if not dist.is_initialized():
            raise RuntimeError("Trainer.setup needs an initialised torch.distributed process group")
        with self.hooks.section("setup"):
            self.hooks.fault_point("init", 0)
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
            self.device = device()
            tc = self.cfg.train
            set_determinism(tc.seed)
            data_dir = Path(tc.data_dir) if tc.data_dir else self.run_dir / "data"
            if not tc.data_dir and self.rank == 0:
                ensure_generated_corpus(data_dir, GENERATED_CORPUS_BYTES, seed=tc.seed)
            dist.barrier()
            self.train_data = TokenShards(data_dir, "train", tc.seq_len)
            self.val_data = TokenShards(data_dir, "val", tc.seq_len)
            self.sampler = ResumableSampler(
                len(self.train_data), tc.micro_batch_size, self.rank, self.world_size, seed=tc.seed
            )
            hf_args = hf_model_args(self.cfg.model.hf_checkpoint, self.train_data, self.rank)
            vocab = hf_args.vocab_size if hf_args else max(self.train_data.vocab_size, TOKENIZER.vocab_size)
            self._model_spec = ModelSpec(self.cfg.model.size, vocab, max(tc.seq_len, 8), hf_args, tc.seed)
            root = Path(self.cfg.checkpoint.dir) if self.cfg.checkpoint.dir else self.run_dir / "checkpoints"
            # With a checkpoint or a memory-tier snapshot on any rank, the restore fills every weight: this rank's
            # shards only, nothing initialised (initialising the 1B model took 9.3 s of each in-process restart on an
            # H200). Should the restore find nothing usable after all, it initialises then.
            in_memory = self.memory_interval_steps != 0 and holds_snapshot(root)
            self.on_meta = any_rank(committed_checkpoint_exists(root) or in_memory, self.device)
            if self.memory_interval_steps != 0 and not self.on_meta:  # a fresh start: slots readied meanwhile
                begin_memory_slots(root, self.rank, self.world_size, self._model_spec, self.events)
            self.model = sharded_model(self._model_spec, self.device, on_meta=self.on_meta)
            self.flops_per_token = flops_per_token(self.model.args, tc.seq_len)
            self.optimizer = adamw(self.model, tc.lr, tc.weight_decay)
            self.state = AppState(
                self.model, self.optimizer, self.sampler, rank=self.rank, extra=self.hooks.extra_state()
            )
            self.ckpt = CheckpointManager(
                root,
                self.checkpoint_mode,
                self.cfg.checkpoint.keep_last,
                self.events,
                self.rank,
                self.world_size,
                collective_timeout_s=checkpoint_timeout_s(self.cfg.inprocess),
                bulk_timeout_s=checkpoint_wait_s(self.cfg.ft.section_timeouts_s["checkpoint"]),
                nvrx_staging=self.cfg.checkpoint.nvrx_staging,
                write_threads=self.cfg.checkpoint.write_threads,
                memory_interval_steps=self.memory_interval_steps,
                memory_overhead_budget=self.cfg.checkpoint.memory_overhead_budget,
                memory_ceiling=self.cfg.checkpoint.interval_steps,
            )
            self.progress = StorageProgress(self.ckpt, self.hooks, self.cfg.checkpoint.max_failed_saves, self.rank)
            self.timer = StepTimer(self.flops_per_token, self.world_size, peak_flops_per_device(self.device))

    def _initialise_weights(self) -> None:
        """A fresh start after all on a model built on the meta device (its checkpoints were unusable or gone):
        the seeded initial weights, exactly those of :func:`initialised_model`, each rank taking its shards."""
        full = initialised_model(self._model_spec).state_dict()
        set_model_state_dict(self.model, full, options=StateDictOptions(full_state_dict=True))
        self.on_meta = False

    def restore(self) -> int:
        """Load the newest committed, verified checkpoint; return the step to resume from. Collective."""
        assert self.ckpt is not None and self.progress is not None, "call setup() first"
        with self.hooks.section("setup"):
            step = self.ckpt.load_latest(
                self.state,
                allow_fresh_start=self.allow_fresh_start,
                before_load=lambda s: self.hooks.fault_point("restore", s),
            )
            if step is None and self.on_meta:
                self._initialise_weights()
            if step is None and self.cfg.model.hf_checkpoint:
                n = load_hf_weights(self.model, self.cfg.model.hf_checkpoint, rank=self.rank)
                if self.rank == 0:
                    print(
                        f"[trainer] fresh start from the Hugging Face weights in {self.cfg.model.hf_checkpoint} "
                        f"({n} tensors)",
                        flush=True,
                    )
        self.step = step or 0
        self.state.step = self.step
        self.progress.restored(self.step)
        return self.step

    # ------------------------------------------------------------------ loop
    @property
    def losses(self) -> dict[int, float]:
        """Global-mean training loss per step seen by this process."""
        return dict(self._losses)

    def _global_mean(self, value: torch.Tensor, *, stop_flag: bool | None = None) -> float:
        """The mean of ``value`` over the ranks; with ``stop_flag``, the same all-reduce counts the ranks whose flag is
        set (:attr:`stopping`: every rank gets the same count at the same step)."""
        t = value.detach().float().reshape(1).to(self.device)
        if stop_flag is not None:
            t = torch.cat([t, torch.tensor([float(stop_flag)], device=self.device)])
        dist.all_reduce(t)
        values = t.tolist()
        if stop_flag is not None:
            self.stopping = round(values[1])
        return values[0] / self.world_size

    def _loss(self, ids: list[int], data: TokenShards) -> torch.Tensor:
        x, y = data.batch(ids)
        logits = self.model(x.to(self.device))
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.to(self.device).reshape(-1))

    def train_step(self, step: int) -> float:
        """One optimizer step (``step`` is 1-based); returns the global-mean loss."""
        tc = self.cfg.train
        loss = self._loss(self.sampler.next_batch(), self.train_data)
        loss.backward()
        clip_grad_norm_(self.model.parameters(), tc.grad_clip)
        lr = lr_at(step, lr=tc.lr, min_lr=tc.min_lr, warmup=tc.warmup_steps, total=tc.steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if self.ckpt is not None:  # a memory snapshot's device-to-host copy reads what the step changes
            self.ckpt.before_optimizer_step()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return self._global_mean(loss, stop_flag=sigterm.request().requested_at is not None)

    def evaluate(self) -> float:
        """Mean loss over the first ``eval_batches`` global batches of the val split (no grad)."""
        tc = self.cfg.train
        total = torch.zeros(())
        with torch.no_grad():
            for b in range(tc.eval_batches):
                start = (b * self.world_size + self.rank) * tc.micro_batch_size
                ids = [i % len(self.val_data) for i in range(start, start + tc.micro_batch_size)]
                total += self._loss(ids, self.val_data).cpu()
        return self._global_mean(total / tc.eval_batches)

    def _steps(self) -> Iterator[int]:
        while self.step < self.target_steps:
            yield self.step + 1

    def train(self) -> int:
        """Run to ``target_steps``; returns the final step. Collective."""
        assert self.ckpt is not None and self.progress is not None, "call setup() and restore() first"
        tc = self.cfg.train
        tokens = tc.micro_batch_size * tc.seq_len * self.world_size
        warmed = False
        # A SIGTERM in the loop: the step ends, the ranks agree, the step is saved (training.resilience.sigterm).
        budget = sigterm.stop_budget_s(self.cfg.ft.section_timeouts_s["checkpoint"], ft_launcher=under_ft_launcher())
        try:
            with sigterm.deferred(budget_s=budget, boundary_s=STOP_BOUNDARY_MIN_S) as stop:
                for step in self._steps():
                    self.hooks.fault_point("step", step)
                    with self.hooks.section("step"):
                        self.timer.start()
                        loss = self.train_step(step)
                        timing = self.timer.stop(tokens)
                    self.step = self.state.step = step
                    self._losses[step] = loss
                    self.hooks.heartbeat(step)
                    if self.rank == 0:
                        lr = self.optimizer.param_groups[0]["lr"]
                        self.events.emit("step", step=step, loss=loss, tokens=tokens, lr=lr, **timing)
                    self.progress.poll(step)
                    if not warmed:  # the optimizer state exists after the first step: its layout is the saves'
                        self.ckpt.warm_up(self.state)
                        warmed = True
                    if self.stopping:
                        final_save.stop(self, step, self.stopping)
                    stop.boundary_s = max(stop.boundary_s, STOP_BOUNDARY_STEPS * (timing["step_s"] or 0.0))
                    self._after_step(step, timing["step_s"] or 0.0)
            if self.final_checkpoint:
                self.progress.save_target(self.step, self.state)
        except BaseException:
            self._failed = True
            raise
        return self.step

    def _after_step(self, step: int, step_s: float) -> None:
        """The memory snapshot, storage save and evaluation due after ``step``. Collective."""
        assert self.ckpt is not None
        tc, cc = self.cfg.train, self.cfg.checkpoint
        self.ckpt.step_done(step, step_s)
        if self.ckpt.memory_due(step):
            self.ckpt.snapshot(step, self.state)
        if step % cc.interval_steps == 0:
            self.save_checkpoint()
        if tc.eval_interval and step % tc.eval_interval == 0:
            with self.hooks.section("eval"):
                self.hooks.fault_point("eval", step)
                eval_loss = self.evaluate()
            self.eval_losses[step] = eval_loss
            if self.rank == 0:
                self.events.emit("eval", step=step, loss=eval_loss)

    def save_checkpoint(self) -> None:
        """Checkpoint the current step (see :class:`StorageProgress`). Collective."""
        assert self.progress is not None
        self.progress.save(self.step, self.state)

    def close(self, *, failed: bool = False) -> None:
        """Finalize an in-flight async save (collectively unless training or the caller failed); idempotent."""
        if self._closed or self.ckpt is None:
            return
        self._closed = True
        self._failed = self._failed or failed
        t0 = time.perf_counter()
        self.ckpt.close(collective=not self._failed)
        if self.rank == 0 and time.perf_counter() - t0 > 1.0:
            print(f"[trainer] finalizing the last checkpoint took {time.perf_counter() - t0:.1f}s", flush=True)

    def state_digest(self) -> str:
        """sha256 of the full model + optimizer state (collective)."""
        return state_digest(self.model, self.optimizer)
