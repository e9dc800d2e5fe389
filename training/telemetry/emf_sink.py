"""Where CloudWatch embedded-metric-format (EMF) records go, and their shape: the transport under
:class:`training.telemetry.emf.EmfEmitter`.

* ``AWS_EMF_AGENT_ENDPOINT`` set (``udp://HOST:25888`` or ``tcp://HOST:25888``): sent to the CloudWatch agent's
  EMF listener (on EKS, the node's agent; pods point this at ``status.hostIP``).
* otherwise: written to ``stream`` (stdout by default); an endpoint that fails is reported on stderr once, and the
  records go to the stream from then on.
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
JOB_DIMENSION = "JobName"


class EmfSink:
    """Formats EMF records for the metrics of ``units`` (name -> CloudWatch unit) and sends or writes them."""

    units: dict[str, str] = {}

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
        if self.enabled and self.endpoint:
            self._proto, self._addr = _parse_endpoint(self.endpoint)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

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
        unknown = set(present) - set(self.units)
        if unknown:
            raise ValueError(f"unknown EMF metric(s) {sorted(unknown)}; known: {', '.join(self.units)}")
        return {
            "_aws": {
                "Timestamp": int(self._clock() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": self.namespace,
                        "Dimensions": dimensions or [[JOB_DIMENSION]],
                        "Metrics": [{"Name": k, "Unit": self.units[k]} for k in present],
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
