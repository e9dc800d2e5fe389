"""scripts/lock_image.py: the resolve command and the lock built from a pip installation report."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_config import load_config
from scripts.image_lock import LockedPackage, direct_requirements
from scripts.lock_image import locked_from_report, resolve_command


def test_resolve_command_installs_nothing(tmp_path: Path) -> None:
    cmd = resolve_command(load_config(), tmp_path / "r.json", tmp_path / "t")
    assert cmd[1:4] == ["-m", "pip", "install"] and "--dry-run" in cmd and "--ignore-installed" in cmd
    assert cmd[cmd.index("--report") + 1] == str(tmp_path / "r.json")
    # the direct requirements (their values are asserted in test_image_lock.py) close the command
    assert cmd[-7:] == direct_requirements(load_config())
    assert cmd[cmd.index("--index-url") + 1] == "https://pypi.org/simple"


def report_item(name: str, version: str, hashes: dict | None) -> dict:
    return {
        "metadata": {"name": name, "version": version},
        "download_info": {
            "url": f"https://files/{name}-{version}.whl",
            "archive_info": {"hashes": hashes} if hashes else {},
        },
    }


def test_locked_from_report() -> None:
    report = {"version": "1", "install": [report_item("torch", "2.11.0", {"sha256": "a" * 64})]}
    assert locked_from_report(report) == [LockedPackage("torch", "2.11.0", ("a" * 64,))]


def test_a_report_without_hash_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no sha256 for x==1"):
        locked_from_report({"install": [report_item("x", "1", None)]})
