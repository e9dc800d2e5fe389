"""CloudWatch embedded-metric-format records: structure, switches, the agent endpoint."""

from __future__ import annotations

import io
import json
import socket

import pytest

from platform_config import config_from_dict
from training.telemetry.emf import METRICS, EmfEmitter


def _cfg(enabled: bool = True):
    return config_from_dict({"observability": {"emf_metrics": enabled, "metric_namespace": "TestNs"}})


def _lines(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def _check_emf(rec: dict) -> None:
    """The EMF specification: every metric named in a directive has a numeric member, every dimension a string."""
    (directive,) = rec["_aws"]["CloudWatchMetrics"]
    assert isinstance(rec["_aws"]["Timestamp"], int)
    for dims in directive["Dimensions"]:
        for d in dims:
            assert isinstance(rec[d], str)
    for m in directive["Metrics"]:
        assert isinstance(rec[m["Name"]], float)
        assert m["Unit"] == METRICS[m["Name"]]


def test_disabled_writes_nothing() -> None:
    buf = io.StringIO()
    emf = EmfEmitter(_cfg(False), stream=buf, endpoint="")
    assert emf.step(1, step_s=0.5) is None
    assert buf.getvalue() == ""


def test_step_record() -> None:
    buf = io.StringIO()
    emf = EmfEmitter(_cfg(), stream=buf, endpoint="", clock=lambda: 1000.0)
    emf.step(7, step_s=0.5, tokens=1000, loss=2.5)
    (rec,) = _lines(buf)
    _check_emf(rec)
    assert rec["_aws"]["Timestamp"] == 1_000_000
    assert rec["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "TestNs"
    assert rec["JobName"] == "fsdp-train"
    assert rec["StepsCompleted"] == 1.0 and rec["TokensPerSecond"] == 2000.0 and rec["step"] == 7
    assert "CheckpointAge" not in rec  # no commit seen yet: no made-up age


def test_checkpoint_age_follows_commits() -> None:
    now = [100.0]
    buf = io.StringIO()
    emf = EmfEmitter(_cfg(), stream=buf, endpoint="", clock=lambda: now[0])
    emf.checkpoint(25, stall_s=0.2)
    emf.checkpoint(25, write_s=3.0, committed=True)
    now[0] = 160.0
    emf.step(30, step_s=0.5)
    staged, committed, step = _lines(buf)
    assert staged["CheckpointStall"] == 0.2 and "CheckpointsCommitted" not in staged
    assert committed["CheckpointsCommitted"] == 1.0 and committed["CheckpointAge"] == 0.0
    assert step["CheckpointAge"] == 60.0
    emf.restored(commit_ts=10.0)
    assert emf.step(31, step_s=0.5)["CheckpointAge"] == 150.0


def test_restart_record_has_layer_and_cause_dimensions() -> None:
    buf = io.StringIO()
    emf = EmfEmitter(_cfg(), stream=buf, endpoint="")
    emf.restart(layer="inprocess", cause="exception")
    (rec,) = _lines(buf)
    _check_emf(rec)
    assert rec["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [
        ["JobName"],
        ["JobName", "Layer"],
        ["JobName", "Layer", "Cause"],
    ]
    assert (rec["Layer"], rec["Cause"], rec["Restarts"]) == ("inprocess", "exception", 1.0)


def test_goodput_in_percent() -> None:
    buf = io.StringIO()
    EmfEmitter(_cfg(), stream=buf, endpoint="").goodput(training=0.9, infrastructure=None)
    (rec,) = _lines(buf)
    _check_emf(rec)
    assert rec["TrainingGoodput"] == 90.0 and "InfrastructureGoodput" not in rec


def test_unknown_metric_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown EMF metric"):
        EmfEmitter(_cfg(), stream=io.StringIO(), endpoint="").record({"Bogus": 1.0})


def test_udp_agent_endpoint() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(5)
    port = server.getsockname()[1]
    buf = io.StringIO()
    emf = EmfEmitter(_cfg(), stream=buf, endpoint=f"udp://127.0.0.1:{port}")
    emf.step(3, step_s=0.25)
    data, _ = server.recvfrom(65536)
    server.close()
    emf.close()
    assert json.loads(data)["StepTime"] == 0.25
    assert buf.getvalue() == ""  # sent to the agent, not the stream


def test_unreachable_tcp_endpoint_falls_back_to_the_stream(capsys) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    buf = io.StringIO()
    emf = EmfEmitter(_cfg(), stream=buf, endpoint=f"tcp://127.0.0.1:{port}")
    emf.step(1, step_s=0.1)
    assert _lines(buf)[0]["StepTime"] == 0.1
    assert "failed" in capsys.readouterr().err


def test_bad_endpoint_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="udp://HOST:PORT"):
        EmfEmitter(_cfg(), endpoint="http://x")


def test_the_run_becomes_metrics_while_it_runs(tmp_path) -> None:
    """Rank 0's emitter on scenario A (tests.unit.training.telemetry.test_goodput): the numbers of report.json."""
    from tests.helpers.event_log import emf_records
    from tests.unit.training.telemetry.test_goodput import scenario_a

    recs = emf_records(scenario_a(), tmp_path)
    for rec in recs:
        _check_emf(rec)
    assert [r["step"] for r in recs if "StepsCompleted" in r] == [1, 2, 3, 4, 5, 6, 7, 5, 6, 7, 8]
    (restart,) = [r for r in recs if "Restarts" in r]
    assert (restart["Layer"], restart["Cause"]) == ("inprocess", "exception")
    (rec,) = [r for r in recs if "RecoveryTime" in r]  # written at the first new step, 1009.8
    assert rec["_aws"]["Timestamp"] == 1009800 and rec["Layer"] == "inprocess"
    got = [rec[k] for k in ("DetectionTime", "RestartTime", "RestoreTime", "RecoveryTime", "RollbackSteps")]
    assert got == [0.2, 0.3, 1.5, 2.0, 3.0]
    # goodput so far at every commit (1005.5, 1014.3) and at each process's first step (1001.0, 1009.8)
    goodput = [(r["_aws"]["Timestamp"], r["TrainingGoodput"]) for r in recs if "TrainingGoodput" in r]
    # at 1001.0: step 1 (0.8 s) of 1.0 s; at the commit 1005.5 (written before step 5): steps 1..4 (3.2 s) of
    # 5.5 s; at 1009.8: 1..4 and 5 again
    assert [t for t, _ in goodput] == [1001000, 1005500, 1009800, 1014300]
    assert goodput[0][1] == pytest.approx(80.0)
    assert goodput[1][1] == pytest.approx(100 * 3.2 / 5.5, abs=1e-3)
    assert goodput[2][1] == pytest.approx(100 * 4.0 / 9.8, abs=1e-3)
    # the restored checkpoint (step 4, committed at 1005.5) sets the age after the restart: 1009.8 - 1005.5
    step5 = [r for r in recs if r.get("step") == 5 and "StepsCompleted" in r][1]
    assert step5["CheckpointAge"] == pytest.approx(4.3)


def test_disabled_emitter_is_not_attached_and_writes_nothing(tmp_path) -> None:
    buf = io.StringIO()
    emf = EmfEmitter(_cfg(enabled=False), stream=buf)
    assert not emf.enabled
    emf.on_event({"event": "step", "step": 1, "ts": 0.0})
    assert buf.getvalue() == ""


def test_a_finished_run_publishes_the_goodput_of_its_whole_log(tmp_path) -> None:
    """Scenario A's log (tests.unit.training.telemetry.test_goodput): 6.4 of 14.5 s productive, 14.0 working."""
    from tests.unit.training.telemetry.test_goodput import scenario_a
    from training.telemetry.events import EventLog

    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in scenario_a()))
    buf = io.StringIO()
    emf = EmfEmitter(_cfg(), stream=buf, endpoint="")
    emf.follow(EventLog(tmp_path, 0))
    emf.run_goodput()
    (rec,) = _lines(buf)
    assert rec["TrainingGoodput"] == pytest.approx(100 * 6.4 / 14.5)
    assert rec["InfrastructureGoodput"] == pytest.approx(100 * 14.0 / 14.5)
    buf.truncate(0)
    EmfEmitter(_cfg(enabled=False), stream=buf).run_goodput()
    assert buf.getvalue() == ""
