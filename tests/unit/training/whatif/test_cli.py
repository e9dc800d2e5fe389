"""``python -m training.whatif``: the issue's done-criterion command, the input sources and the error messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from training.telemetry.goodput import analyze, load_events
from training.whatif.cli import main

REPO = Path(__file__).resolve().parents[4]
DONE = ["--steps", "10000", "--step-s", "0.2", "--interval", "100", "--stall-s", "1.0", "--startup-s", "0",
        "--nodes", "1", "--node-mtbf-hours", "1e9"]  # fmt: skip


def test_the_done_criterion_command(tmp_path: Path) -> None:
    """20 s of compute per save and a 1 s stall: 20/21 with a 5 s write, 20/31 with a 30 s one."""
    proc = subprocess.run(
        [sys.executable, "-m", "training.whatif", *DONE, "--write-s", "5", "--json", str(tmp_path / "OUT.json")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    r = json.loads((tmp_path / "OUT.json").read_text())
    assert r["training_goodput"]["p50"] == pytest.approx(20 / 21, abs=0.005)
    assert {"best_interval_steps", "daly_interval_steps"} <= set(r)
    assert r["sweep"] and all({"interval_steps", "training_goodput_p50"} <= set(p) for p in r["sweep"])
    assert (tmp_path / "OUT.png").stat().st_size > 0
    assert "training goodput" in proc.stdout

    assert main([*DONE, "--write-s", "30", "--json", str(tmp_path / "OUT30.json"), "--no-plot", "--no-modes"]) == 0
    r30 = json.loads((tmp_path / "OUT30.json").read_text())
    assert r30["training_goodput"]["p50"] == pytest.approx(20 / 31, abs=0.005)
    assert r30["waterfall_s"]["back_pressure"] > 0


def test_events_option_writes_a_log_the_report_reads(tmp_path: Path) -> None:
    args = ["--steps", "200", "--step-s", "0.5", "--interval", "20", "--stall-s", "0.5", "--write-s", "4",
            "--faults", "exception@50,hang@120", "--mode", "ft-launcher", "--restart-s", "ft_launcher=8",
            "--events", str(tmp_path / "run" / "events.jsonl"), "--json", str(tmp_path / "w.json"), "--no-plot",
            "--sweep-points", "0", "--no-modes", "--trials", "1"]  # fmt: skip
    assert main(args) == 0
    r = json.loads((tmp_path / "w.json").read_text())
    a = analyze(load_events(tmp_path / "run").events)
    assert a.training_goodput == pytest.approx(r["training_goodput"]["p50"], abs=1e-6)
    assert a.infrastructure_goodput == pytest.approx(r["infrastructure_goodput"]["p50"], abs=1e-6)
    assert [f.layer for f in a.faults] == ["ft_launcher", "ft_launcher"]
    assert r["sweep"] == [] and r["best_interval_steps"] is None


def test_config_env_report_and_scenario_file_in_order(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("interval: 40\nstall_s: 2.0\n")
    out = tmp_path / "w.json"
    args = ["--config", str(REPO / "project.yaml"), "--env", "prod", "--from-report",
            str(REPO / "tests/golden/gpu/smoke-2xh200.report.json"), "--scenario", str(scenario), "--steps", "300",
            "--json", str(out), "--no-plot", "--sweep-points", "0", "--no-modes", "--trials", "3"]  # fmt: skip
    assert main(args) == 0
    inputs = json.loads(out.read_text())["inputs"]
    assert (inputs["nodes"], inputs["mode"]) == (8, "inprocess-ft")  # prod
    assert inputs["step_s"] == 0.0266  # the report
    assert (inputs["interval"], inputs["stall_s"]) == (40, 2.0)  # the scenario file over the report's 25 / 4.2
    assert inputs["steps"] == 300  # the flag over everything


HEAD = "error: invalid arguments (python -m training.whatif):\n"
LAYER_VALUE = "expected LAYER=VALUE with LAYER one of inprocess, ft_launcher, job"


@pytest.mark.parametrize(
    ("args", "lines"),
    [
        (["--steps", "0", "--step-s", "1"], ["--steps: must be a whole number >= 1 (got 0)"]),
        (["--steps", "10"], ["--step-s: give the step time (--step-s) or measured points (--step-s-by-nodes)"]),
        (["--step-s", "1", "--restart-s", "kubelet=3"], [f"--restart-s: {LAYER_VALUE} (got 'kubelet=3')"]),
        (["--step-s", "1", "--budget", "job=many"], ["--budget job: expected a whole number of restarts (got 'many')"]),
        (["--step-s", "1", "--faults", "meteor@5"],
         ["--faults: meteor@5 needs a class among exception, hang, gpu_fault, node_loss and 1 <= step <= 1000"]),
        (["--step-s", "1", "--from-report", "/nope/report.json"], ["--from-report: /nope/report.json does not exist"]),
        # every input that is not usable, in one message
        (
            ["--steps", "0", "--step-s", "-1", "--nodes", "0", "--trials", "0", "--restore-s", "soon", "--budget",
             "job=many"],
            [
                "--restore-s: expected P50 or P50,P95 in seconds with P95 >= P50 (got 'soon')",
                "--budget job: expected a whole number of restarts (got 'many')",
                "--steps: must be a whole number >= 1 (got 0)",
                "--step-s: must be > 0 seconds (got -1.0)",
                "--nodes: must be a whole number >= 1 (got 0)",
                "--trials: must be a whole number >= 1 (got 0)",
            ],
        ),
    ],
)  # fmt: skip
def test_bad_inputs_exit_2_naming_every_one(args: list[str], lines: list[str], tmp_path: Path, capsys) -> None:
    assert main([*args, "--json", str(tmp_path / "w.json")]) == 2
    assert capsys.readouterr().err == HEAD + "".join(f"  - {line}\n" for line in lines)
    assert not (tmp_path / "w.json").exists()


def test_an_unknown_environment_names_the_allowed_ones(tmp_path: Path, capsys) -> None:
    assert main(["--step-s", "1", "--env", "staging", "--json", str(tmp_path / "w.json")]) == 2
    assert "environment 'staging' is not defined; allowed: default, prod, scale-1b" in capsys.readouterr().err


def test_values_of_the_wrong_type_end_before_anything_is_read(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--steps", "many", "--step-s", "fast", "--mode", "hope", "--sweep-points", "-1", "--report-nodes", "0"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == HEAD + (
        "  - --report-nodes: a whole number >= 1 (got 0)\n"
        '  - --steps: a whole number (got "many")\n'
        '  - --step-s: a number (got "fast")\n'
        '  - --mode: one of sync-ckpt, async-ckpt, inprocess, ft-launcher, inprocess-ft, k8s-only (got "hope")\n'
        "  - --sweep-points: a whole number >= 0 (got -1)\n"
    )


def test_a_bad_value_in_a_scenario_file_names_the_file(tmp_path: Path, capsys) -> None:
    (tmp_path / "s.yaml").write_text("steps: -3\nstep_s: 1\n")
    assert main(["--scenario", str(tmp_path / "s.yaml"), "--json", str(tmp_path / "w.json")]) == 2
    assert f"--scenario {tmp_path / 's.yaml'}: steps: must be a whole number >= 1" in capsys.readouterr().err


def test_memory_peer_copies_flag_brings_a_lost_node_back_from_memory(tmp_path: Path) -> None:
    # steps of 0.5 s, storage every 100, memory every 5, 2 nodes, a node lost at step 500 (499 done): rework is
    # 499 - 400 = 99 steps = 49.5 s from storage, 499 - 495 = 4 steps = 2.0 s from the peer's memory copy
    args = ["--steps", "2000", "--step-s", "0.5", "--interval", "100", "--stall-s", "1", "--write-s", "5", "--nodes",
            "2", "--memory-interval", "5", "--faults", "node_loss@500", "--node-replace-s", "0", "--node-mtbf-hours",
            "1e9", "--no-plot", "--sweep-points", "0", "--no-modes", "--trials", "3"]  # fmt: skip
    for extra, rework in (([], 49.5), (["--memory-peer-copies"], 2.0)):
        assert main([*args, *extra, "--json", str(tmp_path / "w.json")]) == 0
        assert json.loads((tmp_path / "w.json").read_text())["waterfall_s"]["rework"] == pytest.approx(rework)
