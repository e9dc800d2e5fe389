"""The Trainer under real ``torchrun`` on gloo (2 CPU ranks): learning, resume determinism, resharding,
sync/async checkpoint equality, corruption fallback and the golden loss curve."""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from tests.helpers.training_runs import FAST_CONFIG, make_marker_unreadable, read_result, run_trainer
from training.checkpoint.files import COMMIT_MARKER, hash_shares, list_committed, read_marker, step_dir_name
from training.telemetry.events import read_events

pytestmark = pytest.mark.integration
GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "training" / "loss_curve_tiny.json"
#: The shared sync run's length: checkpoints every 5 steps (FAST_CONFIG) commit 5, 10 and the final 12.
STEPS = 12
#: The shared async run's length and evaluation interval: it commits 5, 10, 15 and 20 (keeps the last 3), evaluates
#: at 10 and 20.
ASYNC_STEPS, ASYNC_EVAL = 20, 10
#: The shared runs' lengths, by checkpoint mode.
RUN_STEPS = {"sync": STEPS, "async": ASYNC_STEPS}


def _cfg(**checkpoint) -> dict:
    cfg = copy.deepcopy(FAST_CONFIG)
    cfg["checkpoint"].update(checkpoint)
    return cfg


def _run_cfg(mode: str) -> dict:
    """The settings of the shared run of ``mode`` (the async one evaluates every :data:`ASYNC_EVAL` steps)."""
    cfg = _cfg()
    if mode == "async":
        cfg["train"]["eval_interval"] = ASYNC_EVAL
    return cfg


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """An uninterrupted 2-rank run of the default settings per checkpoint mode, run once for the module's tests.

    ``sync``: 12 steps; it commits steps 5, 10 and 12 (all kept): tests that need a run which ended earlier take a
    copy without the newer checkpoints (:func:`_copy_of`). At its end it also saves its final state once with a sync
    and once with an async CheckpointManager under ``<run>/../both`` (``--save-both``, outside the run directory).
    ``async``: 20 steps, evaluating every 10 (:func:`_run_cfg`)."""
    runs: dict[str, Path] = {}

    def get(mode: str) -> Path:
        if mode not in runs:
            root = tmp_path_factory.mktemp(f"{mode}{RUN_STEPS[mode]}")
            extra = ["--save-both", root / "both"] if mode == "sync" else []
            _, runs[mode] = run_trainer(
                root / "run", steps=RUN_STEPS[mode], mode=mode, config=_run_cfg(mode), extra_args=extra
            )
        return runs[mode]

    return get


def _copy_of(run: Path, to: Path, *, up_to: int = STEPS) -> Path:
    """A copy of ``run`` whose checkpoints end at step ``up_to`` (the newer ones are removed)."""
    shutil.copytree(run, to)
    for step, path in list_committed(to / "checkpoints"):
        if step > up_to:
            shutil.rmtree(path)
    return to


def test_two_ranks_learn_and_log_step_events(finished_runs: Callable[[str], Path]) -> None:
    run = finished_runs("async")  # 20 steps, evaluating every 10
    result = read_result(run)
    losses = [result["losses"][str(s)] for s in range(1, 21)]
    assert result["world_size"] == 2 and result["final_step"] == 20
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5
    events = read_events(run)
    steps = [e for e in events if e["event"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, 21)) and {e["rank"] for e in steps} == {0}
    assert all(e["tokens"] == 2 * 4 * 32 and e["tokens_per_s"] > 0 and e["mfu"] is None for e in steps)
    assert [e["step"] for e in events if e["event"] == "eval"] == [10, 20]
    committed = [e for e in events if e["event"] == "ckpt_committed"]
    assert [e["step"] for e in committed] == [5, 10, 15, 20]
    assert all(e["backend"] == "torch.dcp.async_save" for e in committed)
    assert "needs CUDA" in next(e for e in events if e["event"] == "ckpt_begin")["note"]
    assert [s for s, _ in list_committed(run / "checkpoints")] == [10, 15, 20]  # keep_last=3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resume_is_bitwise_identical_to_an_uninterrupted_run(
    tmp_path: Path, mode: str, finished_runs: Callable[[str], Path]
) -> None:
    straight = finished_runs(mode)
    _, resumed = run_trainer(tmp_path / "resumed", steps=7, mode=mode, config=_run_cfg(mode))  # commits 5, 7 (final)
    run_trainer(resumed, steps=RUN_STEPS[mode], mode=mode, config=_run_cfg(mode))
    a, b = read_result(straight), read_result(resumed)
    assert b["restored_from"] == 7
    assert b["losses"] == {k: v for k, v in a["losses"].items() if int(k) > 7}
    assert b["digest"] == a["digest"]


def test_resharding_two_ranks_to_one(tmp_path: Path, finished_runs: Callable[[str], Path]) -> None:
    run = _copy_of(finished_runs("sync"), tmp_path / "run")
    two = read_result(run)
    # one launch on one rank: the digest right after the restore, then training goes on with one rank
    run_trainer(run, nproc=1, steps=STEPS + 2, mode="sync", config=_cfg(), extra_args=["--restored-digest"])
    one = read_result(run)
    assert (one["world_size"], one["restored_from"]) == (1, STEPS)
    assert one["restored_digest"] == two["digest"]
    restore = [e for e in read_events(run) if e["event"] == "restore"][-1]
    assert (restore["saved_world_size"], restore["world_size"]) == (2, 1)
    assert one["final_step"] == STEPS + 2


def _load_full(dcp_dir: Path, out: Path) -> dict:
    dcp_to_torch_save(dcp_dir, out)
    return torch.load(out, weights_only=False)


def _assert_identical(a, b, key: str = "") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), key
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), key
        for k in a:
            _assert_identical(a[k], b[k], f"{key}.{k}")
    else:
        assert a == b, key


def test_sync_and_async_checkpoints_of_the_same_state_load_identically(
    tmp_path: Path, finished_runs: Callable[[str], Path]
) -> None:
    both = finished_runs("sync").parent / "both"  # the shared sync run's final state, saved both ways
    sync = _load_full(both / "sync" / step_dir_name(STEPS), tmp_path / "sync.pt")
    asyn = _load_full(both / "async" / step_dir_name(STEPS), tmp_path / "async.pt")
    model_keys = [k for k in sync["app"]["model"]]
    assert model_keys and sync["app"]["optim"]["state"]
    _assert_identical(sync["app"]["model"], asyn["app"]["model"], "model")
    _assert_identical(sync["app"]["optim"], asyn["app"]["optim"], "optim")
    assert sync["app"]["step"] == asyn["app"]["step"] == STEPS
    assert sync["app"]["sampler"] == asyn["app"]["sampler"]


def test_corrupt_newest_checkpoint_falls_back_and_still_matches(
    tmp_path: Path, finished_runs: Callable[[str], Path]
) -> None:
    straight = finished_runs("sync")
    run = _copy_of(straight, tmp_path / "run", up_to=10)  # checkpoints 5 and 10
    newest = run / "checkpoints" / step_dir_name(10)
    # a data file that rank 1 hashes when the two ranks verify together: its verdict must reach rank 0
    (name,) = [n for n in hash_shares(read_marker(newest)["files"], 2)[1] if n.endswith(".distcp")]
    shard = newest / name
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    run_trainer(run, steps=STEPS, mode="sync", config=_cfg())
    result = read_result(run)
    assert result["restored_from"] == 5
    assert result["digest"] == read_result(straight)["digest"]
    (event,) = [e for e in read_events(run) if e["event"] == "ckpt_quarantined"]
    assert event["step"] == 10 and name in event["reason"]


def test_all_checkpoints_unusable_exits_non_zero_with_named_error(
    tmp_path: Path, finished_runs: Callable[[str], Path]
) -> None:
    run = _copy_of(finished_runs("sync"), tmp_path / "run", up_to=5)
    (run / "checkpoints" / step_dir_name(5) / "__0_0.distcp").unlink()
    proc, _ = run_trainer(run, steps=8, mode="sync", config=_cfg(), check=False)
    assert proc.returncode != 0
    assert "NoUsableCheckpointError" in proc.stdout + proc.stderr


def test_an_unreadable_marker_never_restarts_from_step_0_nor_deletes_the_checkpoint(
    tmp_path: Path, finished_runs: Callable[[str], Path]
) -> None:
    """The run committed step 5 last; on the next launch ``COMMITTED`` cannot be read: the launch fails naming the
    file, trains nothing, and step_5/ is still there, whole."""
    run = _copy_of(finished_runs("sync"), tmp_path / "run", up_to=5)
    ckpt = run / "checkpoints" / step_dir_name(5)
    make_marker_unreadable(ckpt)
    files = sorted(p.name for p in ckpt.iterdir())
    first_launch = [e["step"] for e in read_events(run) if e["event"] == "step"]
    proc, _ = run_trainer(run, steps=STEPS + 2, mode="sync", config=_cfg(), check=False)
    assert proc.returncode != 0
    assert f"cannot read the commit marker {ckpt / COMMIT_MARKER}: EISDIR" in proc.stdout + proc.stderr
    assert sorted(p.name for p in ckpt.iterdir()) == files
    assert first_launch == list(range(1, STEPS + 1))
    assert [e["step"] for e in read_events(run) if e["event"] == "step"] == first_launch  # no step of its own


def test_golden_loss_curve_tiny(tmp_path: Path) -> None:
    """First 20 losses of a fixed-seed single-rank tiny run; regenerate with UPDATE_GOLDEN=1."""
    cfg = _cfg(interval_steps=1000)
    _, run = run_trainer(tmp_path / "run", nproc=1, steps=20, mode="sync", config=cfg)
    losses = [read_result(run)["losses"][str(s)] for s in range(1, 21)]
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps({"config": cfg, "torch": torch.__version__, "losses": losses}, indent=1) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert golden["config"] == cfg, "the golden curve was made with other settings: regenerate with UPDATE_GOLDEN=1"
    # The numbers are torch's: another release may compute other ones, and a match would be luck (issue 48, item 8)
    assert golden["torch"] == torch.__version__, (
        f"the golden curve was recorded with torch {golden['torch']}, this is torch {torch.__version__}: "
        "regenerate it with UPDATE_GOLDEN=1 and review the change"
    )
    assert losses == pytest.approx(golden["losses"], rel=1e-5, abs=1e-6)
    shutil.rmtree(run / "data", ignore_errors=True)
