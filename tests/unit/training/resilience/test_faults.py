"""Fault schedules, persisted fired-state and the injection of each kind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from platform_config import config_from_dict
from tests.helpers.training_runs import REPO_ROOT
from tests.helpers.training_runs import test_env as child_env
from training.resilience.exit_codes import FailureLedger
from training.resilience.faults import (
    Fault,
    FaultInjector,
    InjectedFault,
    RunShape,
    parse_schedule,
    random_problems,
    random_schedule,
    schedule_from_config,
    schedule_problems,
)
from training.telemetry.events import EventLog, read_events


def test_parse_schedule_with_rank_phase_and_sticky() -> None:
    assert parse_schedule("exception@40:1, hang@70/eval,oom@3:0/checkpoint!") == [
        Fault("exception", 40, 1),
        Fault("hang", 70, 0, "eval"),
        Fault("oom", 3, 0, "checkpoint", sticky=True),
    ]
    assert parse_schedule("") == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("boom@3", ["'boom@3': kind must be one of exception, hang, sigkill, oom, comm (got \"boom\")"]),
        ("exception@x", ["'exception@x': step must be a whole number >= 0 (got \"x\")"]),
        ("exception@-3", ["'exception@-3': step must be a whole number >= 0 (got -3)"]),
        ("exception@3:one", ["'exception@3:one': rank must be a whole number >= 0 (got \"one\")"]),
        (
            "exception@3/later",
            ["'exception@3/later': phase must be one of init, step, checkpoint, restore, eval (got \"later\")"],
        ),
        ("exception3", ["'exception3': expected kind@step[:rank][/phase][!] (got \"exception3\")"]),
        (
            "ok@1, bogus@x",  # every bad part of every entry
            [
                "'ok@1': kind must be one of exception, hang, sigkill, oom, comm (got \"ok\")",
                "'bogus@x': kind must be one of exception, hang, sigkill, oom, comm (got \"bogus\")",
                "'bogus@x': step must be a whole number >= 0 (got \"x\")",
            ],
        ),
    ],
)
def test_a_malformed_schedule_names_every_bad_part(spec: str, expected: list[str]) -> None:
    assert schedule_problems(spec) == expected
    with pytest.raises(ValueError) as exc:
        parse_schedule(spec)
    assert str(exc.value) == "; ".join(f"bad fault entry {line}" for line in expected)


RUN = RunShape(steps=160, world_size=2, eval_interval=50, world=" (--nproc 2)")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("exception@40:1,hang@70:0,sigkill@110:1,exception@0:1/init,oom@0:1/restore,hang@150/eval,comm@160", []),
        ("exception@10:5", ["'exception@10:5': rank must be below 2, the run's workers (--nproc 2) (got 5)"]),
        ("hang@161", ["'hang@161': step must be at most 160: the run's last step (got 161)"]),
        ("oom@170/checkpoint", ["'oom@170/checkpoint': step must be at most 160: the run's last step (got 170)"]),
        (
            "exception@5:1/init",
            ["'exception@5:1/init': step must be at most 0: an init fault fires at start-up, step 0 (got 5)"],
        ),
        (
            "hang@151/eval",
            ["'hang@151/eval': step must be at most 150: the run's last evaluation (train.eval_interval 50) (got 151)"],
        ),
        (
            "sigkill@900:3",
            [
                "'sigkill@900:3': rank must be below 2, the run's workers (--nproc 2) (got 3)",
                "'sigkill@900:3': step must be at most 160: the run's last step (got 900)",
            ],
        ),
    ],
)
def test_a_schedule_is_checked_against_the_run_it_fires_in(spec: str, expected: list[str]) -> None:
    assert schedule_problems(spec, RUN) == expected


def test_an_eval_fault_in_a_run_without_evaluation_never_fires() -> None:
    no_eval = "'hang@0/eval': an eval fault never fires: no evaluation in {} steps (train.eval_interval {})"
    assert schedule_problems("hang@0/eval", RunShape(160, 2, eval_interval=0)) == [no_eval.format(160, 0)]
    assert schedule_problems("hang@0/eval", RunShape(40, 2, eval_interval=50)) == [no_eval.format(40, 50)]
    assert schedule_problems("hang@0/eval", RunShape(40, 2)) == []  # interval unknown: not checked


def test_the_workers_schedule_is_checked_against_their_world_and_config() -> None:
    cfg = config_from_dict({"train": {"eval_interval": 10}, "faults": {"schedule": "hang@0:1/init"}})
    assert schedule_from_config(cfg, None, steps=20, world_size=2) == [Fault("hang", 0, 1, "init")]
    with pytest.raises(ValueError) as exc:
        schedule_from_config(cfg, "exception@5:2,hang@30/eval", steps=20, world_size=2)
    assert str(exc.value) == (
        "bad fault entry 'exception@5:2': rank must be below 2, the run's workers (WORLD_SIZE 2) (got 2); "
        "bad fault entry 'hang@30/eval': step must be at most 20: the run's last evaluation "
        "(train.eval_interval 10) (got 30)"
    )


def test_random_schedule_is_seeded_and_bounded() -> None:
    a = random_schedule(5, ["exception", "sigkill"], [1.0, 3.0], 7, steps=50, world_size=2)
    assert a == random_schedule(5, ["exception", "sigkill"], [1.0, 3.0], 7, steps=50, world_size=2)
    assert len({f.step for f in a}) == 5 and all(1 <= f.step < 50 and f.rank in (0, 1) for f in a)
    assert a != random_schedule(5, ["exception", "sigkill"], [1.0, 3.0], 8, steps=50, world_size=2)
    with pytest.raises(ValueError, match=r"faults.random.count: at most 4 random fault\(s\) fit in a run of 5 steps"):
        random_schedule(10, ["exception"], None, 0, steps=5, world_size=1)
    assert random_problems(1, 1) == ["faults.random.count: at most 0 random fault(s) fit in a run of 1 steps (got 1)"]
    assert random_problems(0, 1) == random_problems(4, 5) == []


def _injector(tmp_path: Path, spec: str, rank: int = 1) -> FaultInjector:
    events = EventLog(tmp_path, rank=rank)
    return FaultInjector(parse_schedule(spec), tmp_path, rank, events, FailureLedger(tmp_path, rank, 3))


def test_fault_fires_once_and_is_persisted_before_firing(tmp_path: Path) -> None:
    inj = _injector(tmp_path, "exception@4:1,exception@4:0")
    inj.fault_point("step", 3)
    with pytest.raises(InjectedFault, match="exception fault at step 5 on rank 1"):
        inj.fault_point("step", 5)  # first fault point at or after step 4
    assert list(json.loads((tmp_path / "faults" / "fired.rank1.json").read_text())) == ["exception@4:1/step"]
    assert [e["event"] for e in read_events(tmp_path)] == ["fault_injected"]
    # a new process (after recovery) reads the persisted state: the fault never fires again
    _injector(tmp_path, "exception@4:1").fault_point("step", 5)
    assert inj.last_kind == "exception"


def test_sticky_fault_fires_again_and_counts_in_the_ledger(tmp_path: Path) -> None:
    for _ in range(2):
        with pytest.raises(InjectedFault):
            _injector(tmp_path, "exception@2:1!").fault_point("step", 2)
    ledger = FailureLedger(tmp_path, 1, max_repeats=1)
    assert ledger.counts() == {"exception@2/step": 2}
    assert "failed 2 times" in (ledger.escalation() or "")


def test_phase_must_match(tmp_path: Path) -> None:
    inj = _injector(tmp_path, "exception@0:1/restore")
    inj.fault_point("step", 10)
    inj.fault_point("checkpoint", 10)
    with pytest.raises(InjectedFault):
        inj.fault_point("restore", 5)


def test_state_dict_round_trip_never_unfires(tmp_path: Path) -> None:
    inj = _injector(tmp_path, "exception@1:1,exception@2:1")
    old = inj.state_dict()
    with pytest.raises(InjectedFault):
        inj.fault_point("step", 1)
    inj.load_state_dict(old)  # an older checkpoint must not re-arm a fired fault
    inj.fault_point("step", 1)
    assert inj.fired_count() == 1


def test_oom_is_a_real_allocation_failure(tmp_path: Path) -> None:
    with pytest.raises(InjectedFault, match="oom") as info:
        _injector(tmp_path, "oom@1:1").fault_point("step", 1)
    assert "allocate" in str(info.value.__cause__).lower()


def test_comm_without_process_group_still_raises(tmp_path: Path) -> None:
    with pytest.raises(InjectedFault, match="process group broken"):
        _injector(tmp_path, "comm@1:1").fault_point("step", 1)


def _inject_in_child(tmp_path: Path, kind: str, prelude: str = "") -> subprocess.Popen[str]:
    code = (
        f"{prelude}import sys; from pathlib import Path; from training.telemetry.events import EventLog; "
        "from training.resilience.faults import FaultInjector, parse_schedule; "
        "p = Path(sys.argv[1]); "
        f"FaultInjector(parse_schedule('{kind}@1:0'), p, 0, EventLog(p, 0)).fault_point('step', 1)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO_ROOT, env=child_env(), stderr=subprocess.PIPE, text=True
    )


def test_sigkill_in_a_real_process(tmp_path: Path) -> None:
    proc = _inject_in_child(tmp_path, "sigkill")
    assert proc.wait(timeout=30) == -9
    proc.stderr.close()
    assert [e["kind"] for e in read_events(tmp_path)] == ["sigkill"]  # event written before the fault fired


def test_a_hang_spins_in_its_loop_until_killed(tmp_path: Path) -> None:
    """Waits on conditions, not a fixed time: the ``fault_injected`` event, then a stack dump (SIGUSR1 ->
    faulthandler) whose innermost frame is the hang's sleep in ``faults.py``."""
    import queue
    import signal
    import threading
    import time

    import training.resilience.faults as faults

    hang_line = next(
        i for i, line in enumerate(Path(faults.__file__).read_text().splitlines(), 1) if "time.sleep(0.05)" in line
    )
    prelude = "import faulthandler, signal; faulthandler.register(signal.SIGUSR1, all_threads=True); "
    proc = _inject_in_child(tmp_path, "hang", prelude)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    deadline = time.monotonic() + 60
    try:
        while not ((tmp_path / "events.jsonl").exists() and read_events(tmp_path)):
            assert proc.poll() is None and time.monotonic() < deadline, "no fault_injected event from a live process"
            time.sleep(0.05)
        innermost = None
        while innermost != (Path(faults.__file__).name, hang_line):
            assert proc.poll() is None and time.monotonic() < deadline, f"never seen in the hang loop: {innermost}"
            proc.send_signal(signal.SIGUSR1)
            frame = lines.get(timeout=deadline - time.monotonic())
            while "File " not in frame:  # the dump's header: its first frame is the innermost
                frame = lines.get(timeout=deadline - time.monotonic())
            name, line = frame.split('"')[1], int(frame.split("line ")[1].split()[0])
            innermost = (Path(name).name, line)
        assert proc.poll() is None  # still running: a hang is only ended by a kill (or HANG_LIMIT_S)
    finally:
        proc.kill()
        proc.wait()
    assert [e["kind"] for e in read_events(tmp_path)] == ["hang"]  # event written before the fault fired
