"""Timeout sanity: configured heartbeat / section / in-process timeouts vs measured times.

Checked once per process at three moments (``training.train`` calls :func:`check`): after setup
(init time), after the first few steps (step time: the time between two heartbeats less the checkpoint and
evaluation sections in it, which have timeouts of their own) and after the first checkpoint (checkpoint time).
A timeout below the measured time is certain to misfire: an error (:class:`TimeoutConfigError`,
exit code CONFIG). A timeout below ``margin`` x the measured time is a warning. Static ordering rules
between the layers are checked by :func:`check_static`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from training.resilience.exit_codes import UnrecoverableError
from training.resilience.hang import MIN_SAMPLES

#: Timeouts below this multiple of the measured time get a warning.
DEFAULT_MARGIN = 2.0


def checkpoint_wait_s(section_s: float) -> float:
    """How long a rank waits on a write in flight inside a checkpoint section of ``section_s``: a tenth (at least
    2 s, at most half) short of it, so that the rank gives the write up and says why (exit 21) before ft_launcher's
    monitor, which checks the section's time every few seconds, kills it with no cause recorded."""
    return section_s - min(max(2.0, section_s / 10), section_s / 2)


class TimeoutConfigError(UnrecoverableError):
    """A configured timeout is certain to misfire; restarting cannot help."""

    cause = "config"


@dataclass(frozen=True)
class Finding:
    level: Literal["note", "warning", "error"]
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.field}: {self.message}"


@dataclass(frozen=True)
class Measured:
    """Measured durations in seconds (None = not measured yet)."""

    init_s: float | None = None
    step_s: float | None = None
    checkpoint_s: float | None = None


def _limits(cfg: Any, inprocess: bool, ft_launcher: bool) -> dict[str, list[tuple[str, float]]]:
    """Per measured quantity, the (field, timeout) pairs that must exceed it."""
    out: dict[str, list[tuple[str, float]]] = {"init_s": [], "step_s": [], "checkpoint_s": []}
    if ft_launcher:
        ft = cfg.ft
        out["init_s"] += [
            ("ft.initial_rank_heartbeat_timeout_s", ft.initial_rank_heartbeat_timeout_s),
            ("ft.section_timeouts_s.setup", ft.section_timeouts_s["setup"]),
        ]
        out["step_s"] += [
            ("ft.rank_heartbeat_timeout_s", ft.rank_heartbeat_timeout_s),
            ("ft.section_timeouts_s.step", ft.section_timeouts_s["step"]),
            ("ft.rank_out_of_section_timeout_s", ft.rank_out_of_section_timeout_s),
        ]
        out["checkpoint_s"] += [
            ("ft.section_timeouts_s.checkpoint", ft.section_timeouts_s["checkpoint"]),
            ("ft.rank_heartbeat_timeout_s", ft.rank_heartbeat_timeout_s),  # a checkpoint lies between two heartbeats
        ]
    if inprocess:
        ip = cfg.inprocess
        for key in out:
            out[key].append(("inprocess.soft_timeout_s", ip.soft_timeout_s))
        out["step_s"].append(("inprocess.gloo_timeout_s", ip.gloo_timeout_s))
    return out


def check(
    cfg: Any, measured: Measured, *, inprocess: bool, ft_launcher: bool, margin: float = DEFAULT_MARGIN
) -> list[Finding]:
    """Findings for the measured durations that are set."""
    findings = []
    labels = {"init_s": "initialisation", "step_s": "a step", "checkpoint_s": "a checkpoint"}
    for key, limits in _limits(cfg, inprocess, ft_launcher).items():
        value = getattr(measured, key)
        if value is None:
            continue
        for name, timeout in limits:
            if timeout <= value:
                findings.append(
                    Finding(
                        "error",
                        name,
                        f"{timeout:g} s but {labels[key]} took {value:.2f} s: it will fire on healthy progress",
                    )
                )
            elif timeout < margin * value:
                findings.append(
                    Finding(
                        "warning",
                        name,
                        f"{timeout:g} s is less than {margin:g}x the measured {labels[key]} time "
                        f"({value:.2f} s): jitter may trigger false restarts",
                    )
                )
    return findings


def check_static(cfg: Any, *, inprocess: bool, ft_launcher: bool) -> list[Finding]:
    """Rules between layers that need no measurement.

    The in-process layer must recover a hang before ft_launcher's step heartbeat/section timeout restarts the
    workers. At steps its hard timeout is the step budget (:mod:`training.resilience.hang`: at least
    ``step_timeout_floor_s``) plus ``hard_timeout_s - soft_timeout_s``; the configured ``hard_timeout_s`` holds
    only before the budget is measured (the first :data:`~training.resilience.hang.MIN_SAMPLES` steps of a (re)start)
    and outside steps. A warning when even the shortest step budget is too long; a note when only the first steps
    are (as when a large model's start-up raised the soft timeout: training/resilience/startup_budget.py).
    """
    findings = []
    if inprocess and ft_launcher:
        ip, ft = cfg.inprocess, cfg.ft
        first = min(ft.rank_heartbeat_timeout_s, ft.section_timeouts_s["step"])
        gap = ip.hard_timeout_s - ip.soft_timeout_s
        at_steps = min(ip.step_timeout_floor_s, ip.soft_timeout_s) + gap
        if at_steps >= first:
            findings.append(
                Finding(
                    "warning",
                    "inprocess.hard_timeout_s",
                    f"the shortest step budget ({ip.step_timeout_floor_s:g} s) + hard - soft ({gap:g} s) is not "
                    f"below ft_launcher's step heartbeat/section timeout ({first:g} s): ft_launcher restarts the "
                    "workers before the in-process layer can recover a hang",
                )
            )
        elif ip.hard_timeout_s >= first:
            findings.append(
                Finding(
                    "note",
                    "inprocess.hard_timeout_s",
                    f"{ip.hard_timeout_s:g} s is not below ft_launcher's step heartbeat/section timeout ({first:g} "
                    f"s): a hang in the first {MIN_SAMPLES} steps of a (re)start, before the step budget is measured, "
                    f"goes to ft_launcher; later ones the in-process layer recovers (the step budget + {gap:g} s)",
                )
            )
    return findings


def enforce(findings: list[Finding], log: Any = print) -> None:
    """Print every finding; raise :class:`TimeoutConfigError` if there is an error."""
    for f in findings:
        log(f"[timeout-check] {f}")
    errors = [f for f in findings if f.level == "error"]
    if errors:
        raise TimeoutConfigError("timeout misconfigured: " + "; ".join(f"{f.field} {f.message}" for f in errors))
