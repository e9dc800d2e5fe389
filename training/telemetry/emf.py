"""CloudWatch embedded-metric-format (EMF) lines for the training metrics, on when ``observability.emf_metrics``.

One JSON object per line; CloudWatch turns each into metric data points in ``observability.metric_namespace``.
Every metric carries the ``JobName`` dimension (``job.job_name``); restart metrics also ``Layer`` and
``Layer``+``Cause``. The dashboard and alarms of ``stacks/observability.py`` read exactly these names.

Where the lines go: :mod:`training.telemetry.emf_sink` (the CloudWatch agent's EMF listener when
``AWS_EMF_AGENT_ENDPOINT`` is set, which is the path that creates metrics on EKS; else stdout, which Fluent Bit
ships as log text only).

Usage: ``EmfEmitter(cfg).follow(event_log)`` turns every event of the process into metrics, during the run
(:meth:`EmfEmitter.on_event`):

* every ``step``: ``StepsCompleted``, ``StepTime``, ``TokensPerSecond``, ``Loss``, ``CheckpointAge`` (the age of
  the newest commit seen, or of the checkpoint this process restored);
* ``ckpt_staged`` / ``ckpt_committed`` / ``ckpt_failed``: ``CheckpointStall`` (back-pressure included),
  ``CheckpointWrite``, ``CheckpointsCommitted``, ``CheckpointsFailed``; a commit also publishes the run's goodput so
  far (``TrainingGoodput``, ``InfrastructureGoodput``, from the goodput analysis of the event log);
* rank 0's ``restart_begin``: ``Restarts`` by ``Layer`` and ``Cause`` (at once: a crash loop never recovers);
* the first step of every (re-)entered process: the report's numbers for each fault that step recovered
  (``DetectionTime``, ``RestartTime``, ``RestoreTime``, ``RecoveryTime`` = fault -> first new step after the restore,
  ``RollbackSteps``, by ``Layer``), and the goodput so far. The values are those of ``report.json``: the same
  analysis (:func:`training.telemetry.goodput.analyze`) of the same log.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from training.telemetry.emf_sink import AGENT_PORT, ENDPOINT_ENV, JOB_DIMENSION, EmfSink

__all__ = ["AGENT_PORT", "ENDPOINT_ENV", "JOB_DIMENSION", "METRICS", "EmfEmitter"]

#: Metric name -> CloudWatch unit. The dashboard and alarms use these names.
METRICS: dict[str, str] = {
    "StepsCompleted": "Count",
    "StepTime": "Seconds",
    "TokensPerSecond": "Count/Second",
    "Loss": "None",
    "CheckpointAge": "Seconds",
    "CheckpointStall": "Seconds",
    "CheckpointWrite": "Seconds",
    "CheckpointsCommitted": "Count",
    "CheckpointsFailed": "Count",
    "Restarts": "Count",
    "DetectionTime": "Seconds",
    "RestartTime": "Seconds",
    "RestoreTime": "Seconds",
    "RecoveryTime": "Seconds",
    "RollbackSteps": "Count",
    "TrainingGoodput": "Percent",
    "InfrastructureGoodput": "Percent",
}


class EmfEmitter(EmfSink):
    """The training's metrics; every method returns the record it wrote (None when disabled)."""

    units = METRICS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_commit_ts: float | None = None
        self.events_path: Path | None = None  # the event log, for the analysis (set by :meth:`follow`)
        self._entered = False  # a start was seen and its first step not yet
        self._goodput: threading.Thread | None = None  # the analysis after a commit, off the saving thread

    def follow(self, events: Any) -> None:
        """Turn every event ``events`` (an :class:`training.telemetry.events.EventLog`) writes into metrics."""
        if self.enabled:
            self.events_path = Path(events.path)
            events.sinks.append(self.on_event)

    def step(
        self,
        step: int,
        *,
        step_s: float | None = None,
        tokens: int | None = None,
        loss: float | None = None,
        checkpoint_age_s: float | None = None,
    ) -> dict[str, Any] | None:
        """One optimizer step; checkpoint age defaults to the time since the last committed checkpoint seen."""
        if checkpoint_age_s is None and self.last_commit_ts is not None:
            checkpoint_age_s = max(0.0, self._clock() - self.last_commit_ts)
        values: dict[str, float | None] = {
            "StepsCompleted": 1,
            "StepTime": step_s,
            "TokensPerSecond": (tokens / step_s) if tokens is not None and step_s else None,
            "Loss": loss,
            "CheckpointAge": checkpoint_age_s,
        }
        return self._emit(values, properties={"step": step})

    def checkpoint(
        self,
        step: int,
        *,
        stall_s: float | None = None,
        write_s: float | None = None,
        committed: bool = False,
        failed: bool = False,
    ) -> dict[str, Any] | None:
        """A checkpoint event: staged (``stall_s``), committed (``write_s``, ``committed=True``) or failed."""
        if committed:
            self.last_commit_ts = self._clock()
        values: dict[str, float | None] = {
            "CheckpointStall": stall_s,
            "CheckpointWrite": write_s,
            # a commit also reports 0 failures and a failure 0 commits: both series exist from the first save on
            "CheckpointsCommitted": 1 if committed else 0 if failed else None,
            "CheckpointsFailed": 1 if failed else 0 if committed else None,
            "CheckpointAge": 0.0 if committed else None,
        }
        return self._emit(values, properties={"step": step})

    def restart(self, *, layer: str, cause: str) -> dict[str, Any] | None:
        """One restart by ``layer`` (inprocess / ft_launcher / job) for ``cause``."""
        dims = [[JOB_DIMENSION], [JOB_DIMENSION, "Layer"], [JOB_DIMENSION, "Layer", "Cause"]]
        return self._emit({"Restarts": 1}, dimensions=dims, dimension_values={"Layer": layer, "Cause": cause})

    def recovery(self, fault: dict[str, Any]) -> dict[str, Any] | None:
        """One recovered fault as ``report.json`` has it (``faults[]``): its times and rollback, by layer."""
        values: dict[str, float | None] = {
            "DetectionTime": fault.get("detection_s"),
            "RestartTime": fault.get("restart_s"),
            "RestoreTime": fault.get("restore_s"),
            "RecoveryTime": fault.get("recovery_s"),
            "RollbackSteps": fault.get("rollback_steps"),
        }
        dims = [[JOB_DIMENSION], [JOB_DIMENSION, "Layer"]]
        layer = fault.get("layer") or "unknown"
        props = {"kind": fault.get("kind"), "step": fault.get("step")}
        return self._emit(values, dimensions=dims, dimension_values={"Layer": layer}, properties=props)

    def goodput(self, *, training: float | None, infrastructure: float | None) -> dict[str, Any] | None:
        """Goodput fractions (0..1), published as percent."""
        values = {
            "TrainingGoodput": None if training is None else 100.0 * training,
            "InfrastructureGoodput": None if infrastructure is None else 100.0 * infrastructure,
        }
        return self._emit(values)

    def restored(self, commit_ts: float | None) -> None:
        """Tell the emitter when the checkpoint a restarted process resumed from was committed."""
        self.last_commit_ts = commit_ts

    def on_event(self, e: dict[str, Any]) -> None:
        """An :class:`training.telemetry.events.EventLog` sink: turns the run's events into the metrics above."""
        kind = e["event"]
        if kind == "step":
            self.step(e["step"], step_s=e.get("step_s"), tokens=e.get("tokens"), loss=e.get("loss"))
            if self._entered:
                self._entered = False
                self._analysis_metrics(recovered_at=e["ts"])
        elif kind == "start":
            self._entered = True
        elif kind == "restore" and e.get("from_step"):
            self.restored(self._commit_ts(e["from_step"]))
        elif kind == "ckpt_staged":
            self.checkpoint(e["step"], stall_s=e.get("stall_s"))
        elif kind == "ckpt_committed":
            self.checkpoint(e["step"], write_s=e.get("write_s"), committed=True)
            self._goodput_in_background()
        elif kind == "ckpt_failed" and e.get("op") != "restore":
            self.checkpoint(e["step"], failed=True)
        elif kind == "restart_begin" and e.get("rank") in (0, None):
            self.restart(layer=e["layer"], cause=e.get("cause", "unknown"))

    def _goodput_in_background(self) -> None:
        """The run's goodput so far, on a thread of its own: a synchronous save commits on the training thread, and
        reading the whole log there would lengthen the stall it measures. One at a time; a commit while one runs
        is covered by it."""
        if self._goodput is not None and self._goodput.is_alive():
            return
        self._goodput = threading.Thread(
            target=self._analysis_metrics, kwargs={"recovered_at": None}, name="emf-goodput", daemon=True
        )
        self._goodput.start()

    def flush(self) -> None:
        """Wait for the goodput analysis under way, if any."""
        if self._goodput is not None:
            self._goodput.join()

    def run_goodput(self) -> None:
        """The run's goodput from the whole log, now (rank 0 of a finished run, as it exits); nothing when disabled."""
        self._analysis_metrics(recovered_at=None)

    def _analysis_metrics(self, *, recovered_at: float | None) -> None:
        """The run's goodput so far and, at a process's first step, the faults that step recovered."""
        if not self.enabled or self.events_path is None:
            return
        from training.telemetry.goodput import analyze, load_events

        a = analyze(load_events(self.events_path.parent).events)
        if recovered_at is not None:
            for f in a.faults:
                if f.recovered_ts == recovered_at:
                    self.recovery(f.to_json())
        self.goodput(training=a.training_goodput, infrastructure=a.infrastructure_goodput)

    def _commit_ts(self, step: int) -> float | None:
        """When the checkpoint of ``step`` was committed, from the event log (None if it is not there)."""
        if self.events_path is None:
            return None
        from training.telemetry.events import read_events

        events = read_events(self.events_path.parent)
        commits = [e["ts"] for e in events if e["event"] == "ckpt_committed" and e.get("step") == step]
        return commits[-1] if commits else None
