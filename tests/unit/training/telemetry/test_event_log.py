"""The goodput tests' log generator writes events in the order of a recorded real run, and the analysis reads both
the same way."""

from __future__ import annotations

from typing import Any

from tests.helpers.event_log import recorded_run, recorded_run_replica
from training.telemetry.goodput import analyze


def _per_rank(events: list[dict[str, Any]]) -> dict[int, list[tuple[Any, ...]]]:
    """Each rank's (event, step, layer, restart, iteration) in file order; an async commit's place among the steps
    depends on how long the write took, so commits are compared apart."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    for e in sorted(events, key=lambda e: e["ts"]):
        if e["event"] != "ckpt_committed":
            key = (e["event"], e.get("step"), e["layer"], e["restart"], e["iteration"])
            out.setdefault(e["rank"], []).append(key)
    return out


def test_the_generator_writes_what_the_trainer_wrote() -> None:
    real, made = recorded_run(), recorded_run_replica().sorted_events()
    assert _per_rank(made) == _per_rank(real)
    commits = [e["step"] for e in real if e["event"] == "ckpt_committed"]
    assert [e["step"] for e in made if e["event"] == "ckpt_committed"] == commits == [25, 40]
    for e in made:  # every field the trainer writes on every event
        assert {"ts", "mono", "host", "pid", "rank", "iteration", "restart", "attempt", "relaunch", "layer"} <= set(e)


def test_the_analysis_reads_both_alike() -> None:
    def shape(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        a = analyze(events)
        return [
            (f.kind, f.step, f.rank, f.layer, f.restored_step, f.rollback_steps, f.detection_source, f.injected)
            for f in a.faults
        ] + [(a.final_step, len(a.steps), len(a.kept), a.checkpoint_summary()["committed_steps"])]

    assert shape(recorded_run_replica().sorted_events()) == shape(recorded_run())
    assert shape(recorded_run()) == [
        ("exception", 12, 1, "inprocess", 0, 11, "restart_begin", True),
        ("sigkill", 27, 1, "ft_launcher", 25, 1, "exit", True),
        (40, 52, 40, [25, 40]),
    ]
