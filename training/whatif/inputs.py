"""Where a :class:`Scenario` comes from: ``project.yaml``, a YAML scenario file, and command-line strings.

Precedence (later wins): the defaults, ``--config``/``--env`` (:func:`from_config`), ``--from-report``
(:mod:`training.whatif.calibrate`), ``--scenario FILE`` (:func:`apply_mapping`), then single flags.

A scenario file uses the :class:`Scenario` field names, e.g.::

    steps: 20000
    step_s: 0.45
    interval: 500
    write_s: 275
    restore_s: {p50: 60, p95: 90}
    step_s_by_nodes: {8: 0.45, 64: 0.5}
    layers:
      inprocess: {restart: {p50: 10, p95: 15}, budget: 8}
    fault_classes:
      - {name: exception, share: 0.5, detection_s: {inprocess: 0, ft_launcher: 0, job: 0}}
      - {name: node_loss, share: 0.5, node_loss: true, detection_s: {job: 50}}
    fault_schedule: [exception@62, node_loss@574]
"""

from __future__ import annotations

import os
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import yaml

from platform_config import ProjectConfig
from training.whatif.params import (
    LAYERS,
    Dist,
    FaultClass,
    LayerParams,
    Scenario,
    ScenarioError,
    default_fault_classes,
    default_layers,
)

SCENARIO_FIELDS = {f.name for f in fields(Scenario)}
FAULT_CLASS_KEYS = {"name", "detection_s", "share", "rate_per_hour", "per", "node_loss", "ready_node"}
LAYER_KEYS = {"restart", "budget", "fail_p"}


def from_config(cfg: ProjectConfig) -> Scenario:
    """A scenario for ``cfg``'s cluster: its nodes, GPUs per node, recovery mode, steps, checkpoint interval, FSx
    capacity, restart budgets and timeouts, and the node MTBF ``observability.node_mtbf_hours``."""
    return Scenario(
        steps=cfg.train.steps,
        interval=cfg.checkpoint.interval_steps,
        mode=cfg.job.mode.value,
        nodes=cfg.gpu_nodes.node_count,
        gpus_per_node=cfg.instance.gpus,
        fsx_capacity_gib=cfg.storage.fsx_capacity_gib,
        node_mtbf_hours=cfg.observability.node_mtbf_hours,
        fault_classes=default_fault_classes(cfg),
        layers=default_layers(cfg),
    )


def load_mapping(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML scenario file as a mapping (errors name the file)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except FileNotFoundError:
        raise ScenarioError(f"--scenario: {p} does not exist") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"--scenario: {p} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"--scenario: {p} must hold a mapping of scenario fields")
    return data


def apply_mapping(sc: Scenario, data: dict[str, Any], source: str) -> Scenario:
    """``sc`` with the fields of ``data`` (a parsed scenario file); ``layers`` merge per layer."""
    unknown = sorted(set(data) - SCENARIO_FIELDS)
    if unknown:
        raise ScenarioError(
            f"{source}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(SCENARIO_FIELDS))}"
        )
    changes: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{source}: {key}"
        if key == "restore_s":
            changes[key] = None if value is None else Dist.of(value, where)
        elif key == "step_s_by_nodes":
            changes[key] = None if value is None else _by_nodes(value, where)
        elif key == "fault_classes":
            changes[key] = tuple(_fault_class(c, where) for c in _list(value, where))
        elif key == "layers":
            changes[key] = _layers(sc.layers, value, where)
        elif key == "fault_schedule":
            changes[key] = tuple(_schedule_item(x, where) for x in _list(value, where))
        else:
            changes[key] = value
    try:
        return replace(sc, **changes)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{source}: {exc}") from None


def parse_dist(text: str, flag: str) -> Dist:
    """``P50`` or ``P50,P95`` (seconds)."""
    parts = text.split(",")
    try:
        if len(parts) > 2:
            raise ValueError
        return Dist(float(parts[0]), float(parts[1]) if len(parts) == 2 else None)
    except ValueError:
        raise ScenarioError(f"{flag}: expected P50 or P50,P95 in seconds with P95 >= P50 (got {text!r})") from None


def parse_by_nodes(text: str, flag: str = "--step-s-by-nodes") -> dict[int, float]:
    """``NODES:SECONDS,...``, e.g. ``2:0.45,8:0.5``."""
    try:
        pairs = {int(n): float(s) for n, s in (item.split(":") for item in text.split(",") if item.strip())}
    except ValueError:
        raise ScenarioError(
            f"{flag}: expected NODES:SECONDS[,NODES:SECONDS...], e.g. 2:0.45,8:0.5 (got {text!r})"
        ) from None
    return _by_nodes(pairs, flag)


def parse_schedule(text: str, flag: str = "--faults") -> tuple[tuple[int, str], ...]:
    """``CLASS@STEP,...``, e.g. ``exception@62,hang@574``."""
    return tuple(_schedule_item(item.strip(), flag) for item in text.split(",") if item.strip())


def parse_layer_values(items: list[str], flag: str) -> dict[str, str]:
    """``LAYER=VALUE`` items (repeatable flags) -> ``{layer: value}``."""
    out = {}
    for item in items:
        layer, sep, value = item.partition("=")
        if not sep or layer not in LAYERS:
            raise ScenarioError(f"{flag}: expected LAYER=VALUE with LAYER one of {', '.join(LAYERS)} (got {item!r})")
        out[layer] = value
    return out


# ------------------------------------------------------------------ pieces
def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ScenarioError(f"{where}: expected a list (got {type(value).__name__})")
    return value


def _by_nodes(value: Any, where: str) -> dict[int, float]:
    if not isinstance(value, dict) or not value:
        raise ScenarioError(f"{where}: expected a mapping of node count to step seconds")
    try:
        out = {int(n): float(s) for n, s in value.items()}
    except (TypeError, ValueError):
        raise ScenarioError(f"{where}: expected node counts and step seconds (got {value})") from None
    if any(n < 1 or s <= 0 for n, s in out.items()):
        raise ScenarioError(f"{where}: node counts must be >= 1 and step seconds > 0 (got {value})")
    return out


def _schedule_item(item: Any, where: str) -> tuple[int, str]:
    if isinstance(item, dict) and set(item) == {"step", "class"}:
        name, step = item["class"], item["step"]
    elif isinstance(item, str) and "@" in item:
        name, _, step = item.partition("@")
    else:
        raise ScenarioError(f"{where}: expected CLASS@STEP or {{step, class}} (got {item!r})")
    try:
        return int(step), str(name)
    except ValueError:
        raise ScenarioError(f"{where}: the step of {item!r} is not a whole number") from None


def _fault_class(value: Any, where: str) -> FaultClass:
    if not isinstance(value, dict) or "name" not in value or "detection_s" not in value:
        raise ScenarioError(f"{where}: each class needs name and detection_s (got {value!r})")
    unknown = sorted(set(value) - FAULT_CLASS_KEYS)
    if unknown:
        raise ScenarioError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(FAULT_CLASS_KEYS))}"
        )
    if not isinstance(value["detection_s"], dict):
        raise ScenarioError(f"{where}: detection_s must map layers to seconds (got {value['detection_s']!r})")
    try:
        return FaultClass(**{**value, "detection_s": {k: float(v) for k, v in value["detection_s"].items()}})
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def _layers(current: dict[str, LayerParams], value: Any, where: str) -> dict[str, LayerParams]:
    if not isinstance(value, dict) or set(value) - set(LAYERS):
        raise ScenarioError(f"{where}: expected a mapping with keys among {', '.join(LAYERS)}")
    out = dict(current)
    for layer, spec in value.items():
        if not isinstance(spec, dict) or set(spec) - LAYER_KEYS:
            raise ScenarioError(f"{where}.{layer}: expected keys among {', '.join(sorted(LAYER_KEYS))}")
        changes: dict[str, Any] = dict(spec)
        if "restart" in changes:
            changes["restart"] = Dist.of(changes["restart"], f"{where}.{layer}.restart")
        try:
            out[layer] = replace(current[layer], **changes)
        except (TypeError, ValueError) as exc:
            raise ScenarioError(f"{where}.{layer}: {exc}") from None
    return out
