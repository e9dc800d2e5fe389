"""The cheap ``get_method_name`` (:mod:`training.launch.rendezvous_names`) names the same frame as the libraries'
``inspect.stack()`` version, and is swapped only into the rendezvous modules that are imported."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from training.launch import rendezvous_names


def _library_get_method_name(monkeypatch: pytest.MonkeyPatch):
    """The libraries' ``inspect.stack()`` version, from tests.helpers.rendezvous_stub, whose import registers the stub
    as torch's rendezvous module: undone after the test (a test module importing it at collection left the stub in
    every later test's torch; an import of ``create_handler`` from it then failed)."""
    torch_module = rendezvous_names.MODULES[0]
    # recorded now, restored after the test (a stand-in while it is not imported: the stub's import replaces it)
    monkeypatch.setitem(sys.modules, torch_module, sys.modules.get(torch_module) or types.ModuleType(torch_module))
    monkeypatch.delitem(sys.modules, "tests.helpers.rendezvous_stub", raising=False)
    return importlib.import_module("tests.helpers.rendezvous_stub").get_method_name


def _record(get_method_name, depth: int | None = None) -> str:
    """What a rendezvous ``_record`` does: name the method that called it (depth 2: ``_record``'s caller)."""
    return get_method_name() if depth is None else get_method_name(depth)


def _keep_alive(get_method_name, depth: int | None = None) -> str:
    return _record(get_method_name, depth)


@pytest.mark.parametrize("which", ["library", "ours"])
def test_both_name_the_caller_of_the_recording_method(which, monkeypatch):
    impl = _library_get_method_name(monkeypatch) if which == "library" else rendezvous_names.get_method_name
    assert _keep_alive(impl) == "_keep_alive"
    assert _keep_alive(impl, 1) == "_record"
    assert _keep_alive(impl, 3) == "test_both_name_the_caller_of_the_recording_method"
    assert _keep_alive(impl, 100_000) == "no_method_name"


def test_cheapen_swaps_the_imported_rendezvous_modules_only(monkeypatch):
    torch_rdzv = importlib.import_module(rendezvous_names.MODULES[0])  # torch's c10d rendezvous
    nvrx_rdzv = importlib.import_module(rendezvous_names.MODULES[1])  # NVRx 0.4.1's (the CPU machines' version)
    monkeypatch.delitem(sys.modules, rendezvous_names.MODULES[3], raising=False)  # 0.7.0's: not imported here
    for module in (torch_rdzv, nvrx_rdzv):
        monkeypatch.setattr(module, "get_method_name", module.get_method_name)  # restored after the test
    changed = rendezvous_names.cheapen((*rendezvous_names.MODULES[:2], *rendezvous_names.MODULES[3:]))
    assert changed == list(rendezvous_names.MODULES[:2])
    assert torch_rdzv.get_method_name is nvrx_rdzv.get_method_name is rendezvous_names.get_method_name


def test_cheapen_loads_the_rendezvous_modules_of_imported_packages_only(monkeypatch):
    """The template loads what its launchers will import after the fork: NVRx 0.4.1's two rendezvous modules here
    (torch and NVRx imported); 0.7.0's barrier module is not in this installation, and a package not imported
    (``nosuchpackage``) is left alone."""
    for name in rendezvous_names.MODULES[1:3]:
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "get_method_name", module.get_method_name)
        monkeypatch.delitem(sys.modules, name)  # as in a template whose imports did not reach them
    changed = rendezvous_names.cheapen((*rendezvous_names.MODULES[1:], "nosuchpackage.rendezvous"), load=True)
    assert changed == list(rendezvous_names.MODULES[1:3])
    assert "nosuchpackage" not in sys.modules
