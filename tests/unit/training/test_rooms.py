"""The layout of ``training/``: rooms by concern, each importing only what its ``__init__`` declares.

Every room's docstring ends its three lines with ``May import: ...``; this test reads those declarations and checks
every ``import`` of every module in the room against them (a room may always import itself). The top-level modules
(``train.py``, ``trainer.py``, ``local.py``) compose the rooms; no room imports them.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

TRAINING = Path(__file__).resolve().parents[3] / "training"
TOP_LEVEL = {"__init__.py", "train.py", "trainer.py", "local.py"}


def rooms() -> list[Path]:
    return sorted(p for p in TRAINING.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


def declared(room: Path) -> set[str]:
    """The rooms named on the ``May import:`` line of the room's docstring (``training.X`` -> ``X``)."""
    doc = ast.get_docstring(ast.parse((room / "__init__.py").read_text())) or ""
    lines = [line for line in doc.splitlines() if line.startswith("May import:")]
    assert len(lines) == 1, f"{room.name}/__init__.py must declare its imports on one 'May import:' line"
    return set(re.findall(r"training\.([a-z_]+)", lines[0]))


def training_imports(path: Path) -> set[str]:
    """The second component of every ``training.*`` module imported by ``path`` (top-level or room name)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + (
                [f"{node.module}.{a.name}" for a in node.names] if node.module == "training" else []
            )
        for name in names:
            parts = name.split(".")
            if parts[0] == "training" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_only_the_entry_points_sit_at_the_top_of_training():
    modules = {p.name for p in TRAINING.glob("*.py")}
    assert modules == TOP_LEVEL


def test_every_room_declares_its_imports_and_keeps_to_them():
    names = {room.name for room in rooms()}
    assert {"checkpoint", "common", "data", "launch", "model", "parallel", "resilience", "telemetry"} <= names
    for room in rooms():
        allowed = declared(room) | {room.name}
        assert allowed - {room.name} <= names, f"{room.name} declares rooms that do not exist"
        for module in room.rglob("*.py"):
            used = training_imports(module)
            top = used & {p.removesuffix(".py") for p in TOP_LEVEL}
            assert not top, f"{module.relative_to(TRAINING)} imports the top-level module(s) {top}"
            assert used <= allowed, f"{module.relative_to(TRAINING)} imports {sorted(used - allowed)}, not declared"


@pytest.mark.parametrize("room", ["common", "launch"])
def test_the_stdlib_rooms_need_no_third_party_package(room: str):
    """The standard library and the room's own modules only (``launch``: a stand-in starts for every worker)."""
    for module in (TRAINING / room).rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for mod in mods:
                    own = mod == f"training.{room}" or mod.startswith(f"training.{room}.")
                    assert own or mod.split(".")[0] in sys.stdlib_module_names | {"__future__"}, mod


def test_no_class_in_training_is_longer_than_a_screenful():
    """Issue 19: no class of ``training/`` over 250 lines (a longer one hides its own protocol; split it)."""
    long = []
    for path in sorted(TRAINING.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 250:
                long.append(f"{path.relative_to(TRAINING)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == []


def module_imports(path: Path) -> set[str]:
    """The ``training.*`` modules ``path`` imports in its module-level statements, into ``if`` (``TYPE_CHECKING``
    too: a circle for the type checker is still a circle) and ``try``, not into functions (a lazy import of a heavy
    module). ``from training.x import y`` names ``training.x.y`` where that is a module, else ``training.x``."""
    found: set[str] = set()
    statements = list(ast.parse(path.read_text()).body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.If):
            statements += [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            statements += [*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {
                f"{node.module}.{a.name}" if module_path(f"{node.module}.{a.name}") else node.module for a in node.names
            }
    return {name for name in found if name.startswith("training.") and module_path(name)}


def module_path(name: str) -> Path | None:
    """The file of module ``training.a.b`` (a package's ``__init__.py``), or None."""
    base = TRAINING.parent.joinpath(*name.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def import_cycle() -> list[str]:
    """One circle in the module-level import graph of ``training/``, as the modules around it, or ``[]``."""
    graph: dict[str, set[str]] = {}
    for path in sorted(TRAINING.rglob("*.py")):
        rel = path.relative_to(TRAINING.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        graph[name] = module_imports(path) - {name}
    done: set[str] = set()
    trail: list[str] = []  # the modules being visited, each imported by the one before

    def visit(node: str) -> list[str]:
        trail.append(node)
        for nxt in sorted(graph.get(node, set())):
            if nxt in trail:
                return [*trail[trail.index(nxt) :], nxt]
            if nxt not in done and (cycle := visit(nxt)):
                return cycle
        done.add(trail.pop())
        return []

    return next((cycle for node in sorted(graph) if node not in done and (cycle := visit(node))), [])


def test_the_module_import_graph_has_no_circle():
    """No module of ``training/`` imports, at module level, one that imports it back through any chain (a circle
    makes the import order matter and hides which module is the lower one: share a third module instead)."""
    assert import_cycle() == []


def test_the_cycle_finder_finds_a_circle(tmp_path, monkeypatch):
    """A known circle of two modules (a -> b -> a, b's import for the type checker only) beside a module that
    imports inside a function only."""
    pkg = tmp_path / "training"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from training import b\n")
    (pkg / "b.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import training.a\n")
    (pkg / "c.py").write_text("def f():\n    from training import a\n")
    monkeypatch.setattr(sys.modules[__name__], "TRAINING", pkg)
    assert import_cycle() == ["training.a", "training.b", "training.a"]
