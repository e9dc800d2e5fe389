"""Every benchmark's command line: bad values end it with status 2 and one message naming each, before any run
starts (a fault schedule is checked against the run it would fire in: a benchmark's runs never fail on it later)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

MODES = "one of inprocess-ft, inprocess, ft-launcher, sync-ckpt, async-ckpt, k8s-only"
SIZES = "one of tiny, small, 1b, llama3-8b"


@pytest.mark.parametrize(
    ("module", "argv", "lines"),
    [
        ("backpressure", ["--steps", "0", "--size", "huge", "--timeout", "0"], [
            '--size: one of tiny, small, 1b, llama3-8b (got "huge")', "--steps: a whole number >= 1 (got 0)",
            "--timeout: a number > 0 (got 0)"]),
        ("backpressure", ["--steps", "10", "--warmup", "10", "--interval", "20"], [
            "--warmup: fewer steps than --steps 10 (got 10)",
            "--interval: at most --steps 10: a save within the run (got 20)"]),
        ("checkpoint_staging", ["--variants", "none,async:fast,sync+mem", "--memory-interval", "0", "--size", "2b"], [
            '--size: one of tiny, small, 1b, llama3-8b (got "2b")',
            '--memory-interval: a whole number of steps >= 1, or auto (got 0)',
            "--variants: none, sync, async or async:STAGING (STAGING one of cuda-ipc, cuda-copy, cuda-ipc-cached, "
            'cpu-shm, cpu-shm-cached), each with an optional +mem (got "async:fast")']),
        ("checkpoint_staging", ["--steps", "5", "--warmup", "5", "--interval", "6", "--timeout", "-1"], [
            "--timeout: a number > 0 (got -1)", "--warmup: fewer steps than --steps 5 (got 5)",
            "--interval: at most --steps 5: a save within the run (got 6)"]),
        ("hang", ["--world-sizes", "1,0", "--repeats", "0", "--port", "99999"], [
            '--world-sizes: comma-separated, each a whole number >= 1 (got "1,0")',
            "--repeats: a whole number >= 1 (got 0)", "--port: a whole number from 1024 to 65535 (got 99999)"]),
        ("hang", ["--steps", "20"], [
            "--steps: 'hang@30': step must be at most 20: the run's last step (got 30)"]),
        ("node_loss", ["--modes", "inprocess,warp", "--nodes", "0", "--at", "-1"], [
            f'--modes: comma-separated, each {MODES} (got "inprocess,warp")', "--nodes: a whole number >= 1 (got 0)",
            "--at: a whole number >= 0 (got -1)"]),
        ("node_loss", ["--nodes", "2", "--steps", "30", "--at", "40", "--indexes", "0,2"], [
            "--at: at most --steps 30: a step of the run (got 40)",
            '--indexes: pod indexes below --nodes 2 (got "0,2")']),
        ("recovery", ["--modes", "k8s-only,fast", "--repeats", "0"], [
            "--modes: comma-separated, each one of inprocess, ft-launcher, inprocess-ft, k8s-only "
            '(got "k8s-only,fast")',
            "--repeats: a whole number >= 1 (got 0)"]),
        ("recovery", ["--modes", "inprocess,k8s-only", "--nproc", "1", "--steps", "50"], [
            "inprocess's fault 'exception@30:1': rank must be below 1, the run's workers (--nproc 1) (got 1)",
            "inprocess's fault 'hang@60:0': step must be at most 50: the run's last step (got 60)",
            "inprocess's fault 'comm@90:1': rank must be below 1, the run's workers (--nproc 1) (got 1)",
            "inprocess's fault 'comm@90:1': step must be at most 50: the run's last step (got 90)",
            "k8s-only's fault 'exception@30:1': rank must be below 1, the run's workers (--nproc 1) (got 1)",
            "k8s-only's fault 'sigkill@60:0': step must be at most 50: the run's last step (got 60)"]),
        ("restart_memory", ["--size", "2b", "--interval", "0", "--nproc", "2", "--faults", "exception@25:2,boom@3"], [
            f'--size: {SIZES} (got "2b")', "--interval: a whole number >= 1 (got 0)",
            "--faults 'exception@25:2': rank must be below 2, the run's workers (--nproc 2) (got 2)",
            "--faults 'boom@3': kind must be one of exception, hang, sigkill, oom, comm (got \"boom\")"]),
        ("restore_verify", ["--gb", "0", "--nproc", "x", "--repeats", "-2"], [
            "--gb: a number > 0 (got 0)", '--nproc: a whole number >= 1 (got "x")',
            "--repeats: a whole number >= 1 (got -2)"]),
        ("startup", ["--steps", "1", "--nproc", "0"], [
            "--nproc: a whole number >= 1 (got 0)", "--steps: a whole number >= 2 (got 1)"]),
        ("suite_cost", ["--top", "-1", "tests/unit/benchmarks"], ["--top: a whole number >= 0 (got -1)"]),
        ("rendezvous_rejoin", ["--replace-after-s", "1,-5", "--hold-s", "-1"], [
            '--replace-after-s: comma-separated, each a number >= 0 (got "1,-5")', "--hold-s: a number >= 0 (got -1)"]),
        ("whatif_holdout", ["{tmp}/a", "{tmp}/b", "--trials", "0", "--faults", "both"], [
            "--trials: a whole number >= 1 (got 0)", '--faults: one of schedule, rate (got "both")',
            'CALIBRATION: a run directory holding events.jsonl (got "{tmp}/a")',
            'HELD_OUT: a run directory holding events.jsonl (got "{tmp}/b")']),
        ("record", ["--machine", " ", "--ckpt-dir", "{tmp}/ck", "--extra", "{tmp}/extra.json"], [
            '--machine: the record\'s key, e.g. "h200x2" (got " ")',
            '--ckpt-dir: a benchmark\'s --out directory holding results.json (got "{tmp}/ck")',
            "--extra: a JSON object of the record's keys ({keys}) (got [\"hang_recovery_seconds\"])"]),
    ],
)  # fmt: skip
def test_bad_values_end_the_benchmark_before_it_runs(module, argv, lines, tmp_path, capsys) -> None:
    bench = importlib.import_module(f"benchmarks.{module}")
    (tmp_path / "extra.json").write_text(json.dumps({"hang_recovery_seconds": 4.0}))
    keys = ", ".join(getattr(bench, "KEYS", ()))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        bench.main([a.format(tmp=tmp_path) for a in argv] + ([] if module in ("record", "whatif_holdout", "suite_cost")
                   else ["--out", str(out)]))  # fmt: skip
    assert exc.value.code == 2
    expected = "".join(f"  - {line.format(tmp=tmp_path, keys=keys)}\n" for line in lines)
    assert capsys.readouterr().err == f"error: invalid arguments (python -m benchmarks.{module}):\n" + expected
    assert not out.exists()


def test_a_used_output_directory_is_refused(tmp_path: Path, capsys) -> None:
    from benchmarks.rendezvous_rejoin import main

    (tmp_path / "delay-1").mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path)])
    assert exc.value.code == 2
    assert f'--out: an empty or new directory (got "{tmp_path}")' in capsys.readouterr().err
