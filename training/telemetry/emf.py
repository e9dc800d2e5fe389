"""CloudWatch embedded-metric-format (EMF) lines for the training metrics, on when ``observability.emf_metrics``.

One JSON object per line; CloudWatch turns each into metric data points in ``observability.metric_namespace``.
Every metric carries the ``JobName`` dimension (``job.job_name``); restart metrics also ``Layer`` and
``Layer``+``Cause``. The dashboard and alarms of ``stacks/observability.py`` read exactly these names.

Where the lines go:

* ``AWS_EMF_AGENT_ENDPOINT`` set (``udp://HOST:25888`` or ``tcp://HOST:25888``): sent to the CloudWatch agent's
  EMF listener. On EKS the ``amazon-cloudwatch-observability`` add-on runs the agent on every node with host
  networking; the observability construct turns its EMF listener on, so pods point this at their node
  (``status.hostIP`` through the downward API). This is the path that creates metrics on EKS.
* otherwise: written to ``stream`` (stdout by default). Container stdout is shipped as log text by Fluent Bit
  (searchable in Logs Insights), but CloudWatch only extracts metrics from EMF sent to the agent or to a log
  group directly, so on EKS set the endpoint.

Usage (the trainer / resilience layer)::

    emf = EmfEmitter(cfg)                     # a no-op unless cfg.observability.emf_metrics
    emf.step(step, step_s=..., tokens=..., loss=...)
    emf.checkpoint(step, stall_s=...)         # staged
    emf.checkpoint(step, write_s=..., committed=True)
    emf.restart(layer="inprocess", cause="exception", recovery_s=..., rollback_steps=...)
    emf.goodput(training=0.91, infrastructure=0.97)
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any, TextIO
from urllib.parse import urlparse

from platform_config.schema import ProjectConfig

ENDPOINT_ENV = "AWS_EMF_AGENT_ENDPOINT"
#: Port of the CloudWatch agent's EMF listener (TCP and UDP), turned on by ``stacks/observability.py``.
AGENT_PORT = 25888

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
    "RecoveryTime": "Seconds",
    "RollbackSteps": "Count",
    "TrainingGoodput": "Percent",
    "InfrastructureGoodput": "Percent",
}
JOB_DIMENSION = "JobName"


class EmfEmitter:
    """Emits EMF records; every method returns the record it wrote (None when disabled)."""

    def __init__(
        self,
        cfg: ProjectConfig,
        stream: TextIO | None = None,
        *,
        endpoint: str | None = None,
        enabled: bool | None = None,
        clock: Any = time.time,
    ) -> None:
        self.enabled = cfg.observability.emf_metrics if enabled is None else enabled
        self.namespace = cfg.observability.metric_namespace
        self.job_name = cfg.job.job_name
        self.stream = stream if stream is not None else sys.stdout
        self.endpoint = endpoint if endpoint is not None else os.environ.get(ENDPOINT_ENV)
        self._clock = clock
        self._sock: socket.socket | None = None
        self._addr: tuple[str, int] | None = None
        self._proto: str | None = None
        self.last_commit_ts: float | None = None
        self._restart_cause: dict[str, tuple[str, float | None]] = {}
        if self.enabled and self.endpoint:
            self._proto, self._addr = _parse_endpoint(self.endpoint)

    # ------------------------------------------------------------------ public API
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
            "CheckpointsCommitted": 1 if committed else None,
            "CheckpointsFailed": 1 if failed else None,
            "CheckpointAge": 0.0 if committed else None,
        }
        return self._emit(values, properties={"step": step})

    def restart(
        self,
        *,
        layer: str,
        cause: str,
        detection_s: float | None = None,
        recovery_s: float | None = None,
        rollback_steps: int | None = None,
    ) -> dict[str, Any] | None:
        """One restart by ``layer`` (inprocess / ft_launcher / job) for ``cause``."""
        values: dict[str, float | None] = {
            "Restarts": 1,
            "DetectionTime": detection_s,
            "RecoveryTime": recovery_s,
            "RollbackSteps": rollback_steps,
        }
        dims = [[JOB_DIMENSION], [JOB_DIMENSION, "Layer"], [JOB_DIMENSION, "Layer", "Cause"]]
        return self._emit(values, dimensions=dims, dimension_values={"Layer": layer, "Cause": cause})

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
        elif kind == "ckpt_staged":
            self.checkpoint(e["step"], stall_s=e.get("stall_s"))
        elif kind == "ckpt_committed":
            self.checkpoint(e["step"], write_s=e.get("write_s"), committed=True)
        elif kind == "ckpt_failed":
            self.checkpoint(e["step"], failed=True)
        elif kind == "restart_begin":
            self._restart_cause[e["layer"]] = (e.get("cause", "unknown"), e["ts"])
        elif kind == "restart_end" and e.get("rank") in (0, None):
            cause, began = self._restart_cause.pop(e["layer"], ("unknown", None))
            self.restart(layer=e["layer"], cause=cause, recovery_s=None if began is None else e["ts"] - began)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # ------------------------------------------------------------------ internals
    def record(
        self,
        values: dict[str, float | None],
        *,
        dimensions: list[list[str]] | None = None,
        dimension_values: dict[str, str] | None = None,
        properties: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The EMF object for ``values`` (None entries dropped); None if nothing is left."""
        present = {k: float(v) for k, v in values.items() if v is not None}
        if not present:
            return None
        unknown = set(present) - set(METRICS)
        if unknown:
            raise ValueError(f"unknown EMF metric(s) {sorted(unknown)}; known: {', '.join(METRICS)}")
        return {
            "_aws": {
                "Timestamp": int(self._clock() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": self.namespace,
                        "Dimensions": dimensions or [[JOB_DIMENSION]],
                        "Metrics": [{"Name": k, "Unit": METRICS[k]} for k in present],
                    }
                ],
            },
            JOB_DIMENSION: self.job_name,
            **(dimension_values or {}),
            **present,
            **(properties or {}),
        }

    def _emit(self, values: dict[str, float | None], **kw: Any) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        rec = self.record(values, **kw)
        if rec is not None:
            self._write(json.dumps(rec, separators=(",", ":")))
        return rec

    def _write(self, line: str) -> None:
        if self._addr is not None:
            try:
                self._send(line)
                return
            except OSError as exc:  # never let metrics break training: fall back to the stream
                print(f"emf: agent endpoint {self.endpoint} failed ({exc}); writing EMF to the stream", file=sys.stderr)
                self._addr = None
                self.close()
        self.stream.write(line + "\n")
        self.stream.flush()

    def _send(self, line: str) -> None:
        assert self._addr is not None
        if self._proto == "udp":
            if self._sock is None:
                self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._sock.sendto(line.encode(), self._addr)
            return
        if self._sock is None:
            self._sock = socket.create_connection(self._addr, timeout=1.0)
        self._sock.sendall((line + "\n").encode())


def _parse_endpoint(endpoint: str) -> tuple[str, tuple[str, int]]:
    u = urlparse(endpoint)
    if u.scheme not in ("udp", "tcp") or not u.hostname or not u.port:
        raise ValueError(f"{ENDPOINT_ENV}={endpoint!r}: expected udp://HOST:PORT or tcp://HOST:PORT")
    return u.scheme, (u.hostname, u.port)
