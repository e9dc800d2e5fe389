"""The report CLI: report.json, the printed table, missing or broken event logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.training.telemetry.test_goodput import kill_run, scenario_a, scenario_backpressure
from training.telemetry.report import main

REPO = Path(__file__).resolve().parents[4]


def _write(run: Path, events: list[dict], extra: str = "") -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n" + extra)


def test_report_json_and_table(tmp_path: Path, capsys) -> None:
    _write(tmp_path, scenario_a(), extra='{"ts": 1016.0, "event": "ste')  # a torn last line
    assert main([str(tmp_path), "--no-plots", "--no-plan"]) == 0
    r = json.loads((tmp_path / "report.json").read_text())
    assert r["final_step"] == 8 and r["wall_seconds"] == 14.5
    (f,) = r["faults"]
    assert (f["layer"], f["detection_s"], f["restart_s"], f["restore_s"], f["recovery_s"]) == (
        "inprocess", 0.2, 0.3, 1.5, 2.0,
    )  # fmt: skip
    assert r["recovery_s_by_layer"]["inprocess"] == {"p50": 2.0, "p95": 2.0, "max": 2.0, "n": 1}
    assert r["events"]["torn_lines"] == 1
    out = capsys.readouterr().out
    assert "training goodput        44.1%" in out  # 6.4 / 14.5
    assert "infrastructure goodput  96.5%" in out  # 14.0 / 14.5 = 0.9655 in report.json
    assert "  1  exception  8     1     inprocess  0.20      0.30       1.50       2.00" in out
    assert "efficiency              94.7%  (steps/s with / without checkpoints: 0.95 / 1.00)" in out
    assert "1 torn (non-JSON) line(s) skipped" in out
    assert "Restarts: 1  (inprocess/exception 1); a fault that restarted two layers is one recovery above" in out


def test_back_pressure_is_reported_and_warned(tmp_path: Path, capsys) -> None:
    _write(tmp_path, scenario_backpressure())
    assert main([str(tmp_path), "--no-plots", "--no-plan"]) == 0
    ck = json.loads((tmp_path / "report.json").read_text())["checkpoint"]
    assert (ck["backpressure_s"], ck["interval_s"], ck["write_s_mean"]) == (2.0, 2.6, 3.0)
    out = capsys.readouterr().out
    assert "back-pressure 2.00 s in all" in out
    assert "checkpoint interval 2.60 s is shorter than the write time 3.00 s" in out


def test_a_silent_kill_is_named_from_the_launcher_log(tmp_path: Path) -> None:
    kill_run(inject=False).write(tmp_path)
    line = "[2026-11-30 20:41:33,569] [ERROR] [ft_launcher19378@node-0] failed (exitcode: -9) local_rank: 1 (pid: 101)"
    (tmp_path / "launcher.log").write_text(f"== attempt 0\n{line} of binary: python\n")
    assert main([str(tmp_path), "--no-plots", "--no-plan"]) == 0
    (f,) = json.loads((tmp_path / "report.json").read_text())["faults"]
    assert (f["kind"], f["pid"], f["detection_s"], f["recovery_s"]) == ("uninjected:sigkill", 101, 0.4, 5.4)
    assert f["cause_source"] == f"launcher.log:2: {line} of binary: python"


HEAD = "error: invalid arguments (python -m training.telemetry.report):\n"
NO_LOG = "RUN_DIR: a run directory holding events.jsonl (training writes it as it starts: did the run start?)"


@pytest.mark.parametrize(
    ("flags", "lines"),
    [
        (["nope"], [NO_LOG + ' (got "{tmp}/nope")']),
        (["run", "--env", "staging"], ["--config / --env: invalid configuration ({repo}/project.yaml): environment "
                                       "'staging' is not defined; allowed: default, prod, scale-1b"]),
        (["run", "--plan-env", "nope"], ["--plan-env: invalid configuration ({repo}/project.yaml): environment 'nope' "
                                         "is not defined; allowed: default, prod, scale-1b"]),
        (["nope", "--config", "{tmp}/none.yaml"], [NO_LOG + ' (got "{tmp}/nope")', "--config / --env: configuration "
                                                   "file {tmp}/none.yaml does not exist"]),
    ],
)  # fmt: skip
def test_bad_inputs_end_the_command_before_it_reads_anything(flags, lines, tmp_path: Path, capsys) -> None:
    _write(tmp_path / "run", scenario_a())
    argv = [f.format(tmp=tmp_path) for f in flags]
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path / argv[0]), *argv[1:], "--no-plots"])
    assert exc.value.code == 2
    expected = HEAD + "".join("  - " + line.format(tmp=tmp_path, repo=REPO) + "\n" for line in lines)
    assert capsys.readouterr().err == expected
    assert not (tmp_path / "run" / "report.json").exists()


def test_empty_event_log(tmp_path: Path, capsys) -> None:
    _write(tmp_path, [])
    assert main([str(tmp_path), "--no-plots"]) == 0
    assert "the event log is empty" in capsys.readouterr().out
    assert json.loads((tmp_path / "report.json").read_text())["training_goodput"] is None


def test_cli_module_writes_plots(tmp_path: Path) -> None:
    _write(tmp_path, scenario_a())
    proc = subprocess.run(
        [sys.executable, "-m", "training.telemetry.report", str(tmp_path), "--no-plan"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    plots = ["timeline.png", "recovery_hist.png", "recovery_waterfall.png"]
    assert json.loads((tmp_path / "report.json").read_text())["plots"] == plots
    for name in plots:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_configured_node_mtbf_reaches_the_advice(tmp_path: Path) -> None:
    _write(tmp_path / "run", scenario_a())
    cfg = tmp_path / "project.yaml"
    cfg.write_text("observability:\n  node_mtbf_hours: 2.0\ncheckpoint:\n  interval_steps: 3\n")
    assert main([str(tmp_path / "run"), "--no-plots", "--no-plan", "--config", str(cfg)]) == 0
    advice = json.loads((tmp_path / "run" / "report.json").read_text())["advice"]
    # one host in the events: the job fails as often as its one node
    assert advice["mtbf_s"] == 7200.0 and advice["mtbf_source"] == "observability.node_mtbf_hours 2 h / 1 node(s)"
    assert advice["current_interval_steps"] == 4  # commits of steps 4 and 8


def test_the_planner_recommends_for_the_prod_cluster(tmp_path: Path, capsys) -> None:
    _write(tmp_path, scenario_a())
    assert main([str(tmp_path), "--no-plots"]) == 0
    w = json.loads((tmp_path / "report.json").read_text())["whatif"]
    assert (w["env"], w["nodes"], w["gpus_per_node"], w["steps"]) == ("prod", 8, 8, 5000)  # project.yaml's prod
    # this run: the planner's write_s is the write beyond the staging (1.0 - 0.5)
    assert w["from_run"] == {"step_s": 1.0, "stall_s": 0.5, "write_s": 0.5, "checkpoint_mode": "async"}
    assert w["training_goodput_p50"] == w["by_mode"][w["mode"]]["training_goodput_p50"]
    assert "Planner (python -m training.whatif) for environment prod: 8 x 8 GPUs, 5000 steps" in capsys.readouterr().out


def test_the_planner_says_why_it_cannot_and_can_be_skipped(tmp_path: Path, capsys) -> None:
    _write(tmp_path, [e for e in scenario_a() if e["event"] != "step"])  # no step time to plan with
    assert main([str(tmp_path), "--no-plots"]) == 0
    w = json.loads((tmp_path / "report.json").read_text())["whatif"]
    assert w["env"] == "prod" and w["reason"]
    assert f"  not computed: {w['reason']}" in capsys.readouterr().out
    assert main([str(tmp_path), "--no-plots", "--no-plan", "--plan-env", "nope"]) == 0  # not asked: not checked
    assert "whatif" not in json.loads((tmp_path / "report.json").read_text())
