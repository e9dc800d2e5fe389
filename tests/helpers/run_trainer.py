"""Test-only entry: run the Trainer under torchrun without NVRx (``python tests/helpers/run_trainer.py``).

Rank 0 writes ``<run_dir>/result.json``. ``--save-both DIR`` additionally saves the restored/trained state
once with a sync and once with an async CheckpointManager under DIR/sync and DIR/async (equality tests).
``--restored-digest`` adds ``restored_digest``: the state's digest right after the restore, before training.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

gc.disable()  # during the imports below (as training.train does): ~0.4 CPU-s less per rank; main() turns it on
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from platform_config import config_from_dict  # noqa: E402
from training.checkpoint.manager import CheckpointManager  # noqa: E402
from training.parallel.distributed import checkpoint_timeout_s, destroy_process_group, init_process_group  # noqa: E402
from training.telemetry.events import EventLog  # noqa: E402
from training.trainer import Trainer  # noqa: E402


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def main() -> int:
    gc.enable()
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--mode", choices=["sync", "async"], default="sync")
    p.add_argument("--config-json", default="{}")
    p.add_argument("--fresh", action="store_true")
    p.add_argument("--save-both", type=Path, default=None)
    p.add_argument("--no-train", action="store_true", help="only restore (and --save-both)")
    p.add_argument("--dump-model", type=Path, default=None, help="rank 0 torch.saves the full model state here")
    p.add_argument("--restored-digest", action="store_true", help="also the state's digest before training")
    args = p.parse_args()

    cfg = config_from_dict(json.loads(args.config_json))
    rank, world = init_process_group(timeout_s=60)
    events = EventLog(args.run_dir, rank=rank)
    events.emit("start", world_size=world, mode=args.mode, device="cpu")
    trainer = Trainer(
        cfg, args.run_dir, events, checkpoint_mode=args.mode, target_steps=args.steps, allow_fresh_start=args.fresh
    )
    try:
        trainer.setup()
        restored = trainer.restore()
        restored_digest = trainer.state_digest() if args.restored_digest else None
        final = restored if args.no_train else trainer.train()
    finally:
        trainer.close()
    if args.save_both:
        for mode in ("sync", "async"):
            timeout_s = checkpoint_timeout_s(cfg.inprocess)
            mgr = CheckpointManager(args.save_both / mode, mode, 1, events, rank, world, collective_timeout_s=timeout_s)
            mgr.save(trainer.step, trainer.state)
            mgr.close()
    if args.dump_model:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(trainer.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if rank == 0:
            import torch

            torch.save(full, args.dump_model)
    digest = trainer.state_digest()
    if rank == 0:
        result = {
            "final_step": final,
            "restored_from": restored,
            "world_size": world,
            "losses": {str(k): v for k, v in sorted(trainer.losses.items())},
            "eval_losses": {str(k): v for k, v in sorted(trainer.eval_losses.items())},
            "digest": digest,
            "pid": os.getpid(),
        }
        if restored_digest is not None:
            result["restored_digest"] = restored_digest
        (args.run_dir / "result.json").write_text(json.dumps(result, indent=1))
    events.emit("exit", reason="done", code=0)
    destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Skip interpreter teardown: a gloo + FSDP2 process occasionally aborts there ("terminate called without
    # an active exception", seen in ~1 of 8 runs of a bare fully_shard script) after a clean shutdown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
