"""NVRx ``RankMonitorClient`` for ft_launcher: heartbeats, sections, state in the checkpoint.

Under ``ft_launcher`` (``FT_RANK_MONITOR_IPC_SOCKET`` set) each worker connects to its rank monitor,
sends a heartbeat every step and opens the sections ``setup`` / ``step`` / ``checkpoint``; a rank
whose heartbeat or section exceeds its timeout (``cfg.ft``) is killed and ft_launcher restarts the
worker group. Elsewhere every method is a logged no-op.

The client's state (calculated timeouts; the same on all ranks) is a ``Stateful`` saved with each
checkpoint. ``cfg.ft.calculate_timeouts`` lets NVRx compute timeouts from observed times at each
checkpoint (a collective: all ranks call :meth:`at_checkpoint` at the same step).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
from collections.abc import Callable, Iterator
from typing import Any

from training.resilience import sigterm

log = logging.getLogger(__name__)

IPC_ENV = "FT_RANK_MONITOR_IPC_SOCKET"
SECTIONS = ("setup", "step", "checkpoint")


def under_ft_launcher() -> bool:
    """True when this process was started by ft_launcher (it has a rank-monitor socket)."""
    return bool(os.environ.get(IPC_ENV))


def _stream_broken(err: BaseException) -> bool:
    """True if ``err`` (NVRx wraps the cause as ``__context__``) says the monitor connection is unusable."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, (OSError, EOFError, pickle.UnpicklingError)) or "Unexpected reply" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class FtMonitor:
    """Wraps ``RankMonitorClient``; a no-op when not under ft_launcher or when disabled."""

    def __init__(self, enabled: bool = True, calculate_timeouts: bool = False) -> None:
        self.active = enabled and under_ft_launcher()
        self.calculate_timeouts = calculate_timeouts
        self.client: Any = None
        #: Wraps every message to the rank monitor; the in-process layer sets NVRx's ``CallWrapper.atomic`` so
        #: that a restart never interrupts a half-written message (seen on H200: the monitor then read garbage,
        #: dropped the connection, and the next section update failed with EPIPE).
        self.guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
        self._open: set[str] = set()
        self._loaded: dict[str, Any] | None = None
        #: The message whose exchange (request, then the monitor's reply) was cut short by an exception from outside
        #: (NVRx's restart): the connection is out of step and is replaced before the next message (:meth:`_send`).
        self._cut: str | None = None
        if enabled and not self.active:
            log.info("ft_monitor: not under ft_launcher (%s unset): heartbeats and sections are no-ops", IPC_ENV)

    def start(self) -> None:
        """Connect to the rank monitor (once per process; survives in-process restarts).

        Call it inside the in-process Wrapper: NVRx forks its monitor daemon on entering the Wrapper, and the
        daemon would inherit a connection opened earlier and keep it open after this worker died.
        """
        if not self.active or self.client is not None:
            return
        from nvidia_resiliency_ext.fault_tolerance import RankMonitorClient

        self.client = RankMonitorClient()
        if self._loaded:
            self.client.load_state_dict(self._loaded)
        self.client.init_workload_monitoring()

    def reconnect(self) -> None:
        """A fresh connection to the rank monitor, keeping the client state.

        Only after a failed send: NVRx 0.7.0's rank monitor counts a lost connection as the start of an
        in-job restart and aborts for good (every later worker of that rank is refused) when a second loss
        comes before any message on the new connection.
        """
        if self.client is None:
            return
        with contextlib.suppress(Exception):
            self._loaded = self.client.state_dict() or self._loaded
        with contextlib.suppress(Exception):
            self.client.shutdown_workload_monitoring()
        self.client = None
        self._open.clear()
        self._cut = None
        self.start()

    def _send(self, method: str, *args: Any, retry: bool = True) -> None:
        """One message to the rank monitor under :attr:`guard`; a broken stream is reconnected once.

        An exchange that an exception from outside cut short (NVRx raises its restart exception into the main thread,
        possibly between the request and the reply, or between the reply's length and its body) leaves the stream out
        of step: the next reply read would start mid-message, and the client would wait for bytes that never come
        (seen on the local cluster: ``end_all_sections`` blocked in ``recv`` at an in-process re-entry, the rank's
        NVRx soft timeout fired, and the in-process restart became an ft_launcher one). Such a connection is
        replaced before the next message.
        """
        with self.guard():
            self._replace_cut_connection()
            self._cut = method
            try:
                getattr(self.client, method)(*args)
            except Exception as err:
                self._cut = None
                if not _stream_broken(err):
                    raise
                if sigterm.request().requested_at is not None:
                    # ft_launcher closed its rank monitors when it forwarded the pod's SIGTERM (their socket is gone):
                    # nothing watches this rank while it ends its step and makes its final save (issue 47).
                    log.warning("ft_monitor: %s failed (%s) after SIGTERM: the rank monitor is gone", method, err)
                    self.client = None
                    self._open.clear()
                    return
                log.warning("ft_monitor: %s failed (%s); reconnecting to the rank monitor", method, err)
                self.reconnect()
                if retry:
                    getattr(self.client, method)(*args)
            else:
                self._cut = None

    def _replace_cut_connection(self) -> bool:
        """Replace the connection if an exchange on it was cut short (call under :attr:`guard`); True if it was."""
        if self._cut is None:
            return False
        log.warning("ft_monitor: the %s exchange was cut short; reconnecting to the rank monitor", self._cut)
        self._cut = None
        self.reconnect()
        return True

    def heartbeat(self, step: int) -> None:
        if self.client is not None:
            self._send("send_heartbeat")

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        """A timed section; sections other than setup/step/checkpoint are not monitored."""
        if self.client is None or name not in SECTIONS or name in self._open:
            yield
            return
        self._send("start_section", name)
        if self.client is None:  # the monitor was gone after SIGTERM (see :meth:`_send`): nothing to time
            yield
            return
        self._open.add(name)
        try:
            yield
        except BaseException as exc:
            # Nothing is sent here: while NVRx terminates an iteration the guard would spin, and NVRx keeps raising its
            # restart exception into code that runs meanwhile, so a message sent now is likely cut short. The section
            # is closed by :meth:`end_all_sections` at the in-process re-entry, or by the process's exit. Unless the
            # rank raised the error itself, on this thread, to end the section before its timeout (``ends_section``:
            # a write that outlasted the checkpoint section, whose error path still waits for the write).
            self._open.discard(name)
            if getattr(exc, "ends_section", False):
                with contextlib.suppress(Exception):  # the error, not a failed message, is what propagates
                    self._send("end_section", name, retry=False)
            raise
        if name in self._open:  # (a reconnect meanwhile closed every section)
            self._open.discard(name)
            self._send("end_section", name, retry=False)

    def end_all_sections(self) -> None:
        """Close open sections (after an in-process restart interrupted them), one by one.

        Not with the client's ``end_all_sections``: NVRx 0.7.0 made it a no-op (its message names no section, and
        the client's section filter drops messages for sections without a timeout), so the section an in-process
        restart interrupted stayed open in the client's bookkeeping and at the rank monitor, and the next
        ``start_section`` of it raised "Tried to open step that is already open" (2 x H200, 2026-11-30). The
        sections still open are the client's own record of them (``timeouts_calc``, in 0.4.1 and 0.7.0).
        """
        self._open.clear()
        if self.client is None:
            return
        with self.guard():
            if self._replace_cut_connection():  # a new connection has nothing open
                return
        calc = getattr(self.client, "timeouts_calc", None)
        if calc is None:  # an NVRx without that record: its own CLOSE_ALL is all there is
            self._send("end_all_sections")
            return
        for name in list(calc.open_sections):
            self._send("end_section", name, retry=False)

    def at_checkpoint(self) -> None:
        """Let NVRx compute timeouts from observed times (collective; opt-in)."""
        if self.client is None or not self.calculate_timeouts:
            return
        self.client.calculate_and_set_hb_timeouts(skip_if_not_ready=True)
        self.client.calculate_and_set_section_timeouts(skip_if_not_ready=True)

    def request_shutdown(self, reason: str) -> bool:
        """Ask ft_launcher not to restart the workers (unrecoverable); True if the request was sent."""
        if self.client is None:
            return False
        from nvidia_resiliency_ext.fault_tolerance import WorkloadAction, WorkloadControlRequest

        try:
            self.client.send_workload_control_request(WorkloadControlRequest(WorkloadAction.ShutdownWorkload, reason))
        except Exception as err:  # the launcher connection is optional (older launchers)
            log.warning("ft_monitor: shutdown request failed: %s", err)
            return False
        return True

    def shutdown(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.shutdown_workload_monitoring()
            self.client = None

    # Stateful (JSON text so that any checkpoint format can hold it)
    def state_dict(self) -> dict[str, Any]:
        state = self.client.state_dict() if self.client is not None else (self._loaded or {})
        return {"rank_monitor": json.dumps(state, sort_keys=True)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raw = state.get("rank_monitor")
        if not raw:
            return
        self._loaded = json.loads(raw)
        if self.client is not None:
            self.client.load_state_dict(self._loaded)


def ft_launcher_yaml(ft: Any) -> str:
    """The ``fault_tolerance:`` YAML for ``ft_launcher --ft-cfg-path`` from ``cfg.ft`` (0.4.1 and 0.7.0)."""
    import yaml

    section = {
        "initial_rank_heartbeat_timeout": ft.initial_rank_heartbeat_timeout_s,
        "rank_heartbeat_timeout": ft.rank_heartbeat_timeout_s,
        "rank_section_timeouts": dict(ft.section_timeouts_s),
        "rank_out_of_section_timeout": ft.rank_out_of_section_timeout_s,
        "gpu_memory_poll_interval": ft.gpu_memory_poll_interval_s,  # 0.7.0 and later; 0.4.1 ignores the key
    }
    return yaml.safe_dump({"fault_tolerance": section}, sort_keys=True)


def ft_launcher_args(ft: Any, cfg_path: str, nproc: int, port: int) -> list[str]:
    """ft_launcher arguments for one node (standalone-style rendezvous on localhost)."""
    return [
        f"--nproc-per-node={nproc}",
        f"--max-restarts={ft.max_restarts}",
        f"--monitor-interval={ft.monitor_interval_s}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        f"--ft-cfg-path={cfg_path}",
    ]
