"""The report CLI: report.json, the printed table, missing or broken event logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.unit.training.telemetry.test_goodput import scenario_d
from training.telemetry.report import main

REPO = Path(__file__).resolve().parents[4]


def _write(run: Path, events: list[dict], extra: str = "") -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n" + extra)


def test_report_json_and_table(tmp_path: Path, capsys) -> None:
    _write(tmp_path, scenario_d(), extra='{"ts": 16.0, "event": "ste')  # a torn last line
    assert main([str(tmp_path), "--no-plots"]) == 0
    r = json.loads((tmp_path / "report.json").read_text())
    for key in ("training_goodput", "infrastructure_goodput", "wall_seconds", "final_step", "faults",
                "recovery_s_by_layer", "checkpoint", "advice"):  # fmt: skip
        assert key in r
    assert r["final_step"] == 7 and r["wall_seconds"] == 15.0
    assert [f["layer"] for f in r["faults"]] == ["inprocess", "ft_launcher"]
    assert r["recovery_s_by_layer"]["ft_launcher"] == {"p50": 3.2, "p95": 3.2, "max": 3.2, "n": 1}
    assert r["events"]["torn_lines"] == 1
    assert r["advice"]["interval_s"] is not None
    out = capsys.readouterr().out
    assert "training goodput        46.7%" in out  # 7 / 15
    assert "infrastructure goodput  86.0%" in out  # 12.9 / 15
    assert "ft_launcher" in out and "Checkpoint interval advice" in out
    assert "1 torn (non-JSON) line(s) skipped" in out


def test_missing_event_log_is_a_clear_message(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "nope"), "--no-plots"]) == 2
    assert "no event log" in capsys.readouterr().err


def test_empty_event_log(tmp_path: Path, capsys) -> None:
    _write(tmp_path, [])
    assert main([str(tmp_path), "--no-plots"]) == 0
    assert "the event log is empty" in capsys.readouterr().out
    assert json.loads((tmp_path / "report.json").read_text())["training_goodput"] is None


def test_cli_module_writes_plots(tmp_path: Path) -> None:
    _write(tmp_path, scenario_d())
    proc = subprocess.run(
        [sys.executable, "-m", "training.telemetry.report", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "timeline.png").stat().st_size > 0
    assert (tmp_path / "recovery_hist.png").stat().st_size > 0
    assert json.loads((tmp_path / "report.json").read_text())["plots"] == ["timeline.png", "recovery_hist.png"]


def test_configured_mtbf_reaches_the_advice(tmp_path: Path) -> None:
    _write(tmp_path / "run", scenario_d())
    cfg = tmp_path / "project.yaml"
    cfg.write_text("observability:\n  mtbf_hours: 2.0\ncheckpoint:\n  interval_steps: 3\n")
    assert main([str(tmp_path / "run"), "--no-plots", "--config", str(cfg)]) == 0
    advice = json.loads((tmp_path / "run" / "report.json").read_text())["advice"]
    assert advice["mtbf_s"] == 7200.0 and "configured" in advice["mtbf_source"]
    assert advice["current_interval_steps"] == 3  # one commit in the run: the configured interval


def test_the_planner_recommends_for_the_prod_cluster(tmp_path: Path, capsys) -> None:
    _write(tmp_path, scenario_d())
    assert main([str(tmp_path), "--no-plots"]) == 0
    w = json.loads((tmp_path / "report.json").read_text())["whatif"]
    assert (w["env"], w["nodes"], w["gpus_per_node"], w["steps"]) == ("prod", 8, 8, 5000)  # project.yaml's prod
    assert w["from_run"] == {"step_s": 1.0, "stall_s": 0.0, "write_s": 0.5, "checkpoint_mode": "sync"}  # this run
    assert w["training_goodput_p50"] == w["by_mode"][w["mode"]]["training_goodput_p50"]
    assert "Planner (python -m training.whatif) for environment prod: 8 x 8 GPUs, 5000 steps" in capsys.readouterr().out


def test_the_planner_says_why_it_cannot_and_can_be_skipped(tmp_path: Path, capsys) -> None:
    _write(tmp_path, scenario_d())
    assert main([str(tmp_path), "--no-plots", "--plan-env", "nope"]) == 0
    w = json.loads((tmp_path / "report.json").read_text())["whatif"]
    assert w["env"] == "nope" and "environment 'nope' is not defined" in w["reason"]
    assert "  not computed: " in capsys.readouterr().out
    assert main([str(tmp_path), "--no-plots", "--no-plan"]) == 0
    assert "whatif" not in json.loads((tmp_path / "report.json").read_text())
