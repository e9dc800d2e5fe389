"""make check-image: real pip downloads of a lock for the image's platform, offline against a local index."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from platform_config import load_config
from scripts import check_image
from scripts.check_image import download_command, run
from scripts.image_lock import LOCK_FILE, LockedPackage, platform_tags, render_lock


def make_wheel(directory: Path, name: str, version: str, tag: str) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    wheel = directory / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


def index_with(tmp_path: Path, wheels: list[tuple[str, str, str]]) -> tuple[str, dict[str, str]]:
    """A PEP 503 simple index in ``tmp_path``; returns its URL and name -> sha256."""
    root = tmp_path / "index"
    hashes = {}
    for name, version, tag in wheels:
        project = root / name
        project.mkdir(parents=True, exist_ok=True)
        wheel = make_wheel(project, name, version, tag)
        hashes[name] = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (project / "index.html").write_text(f'<a href="{wheel.name}#sha256={hashes[name]}">{wheel.name}</a>\n')
    return root.as_uri(), hashes


def test_download_command_targets_the_image(tmp_path: Path) -> None:
    cmd = download_command(load_config(), LOCK_FILE, tmp_path, index_url="file:///idx")
    assert cmd[3:8] == ["download", "--disable-pip-version-check", "--no-deps", "--require-hashes", "--progress-bar"]
    assert cmd[cmd.index("--index-url") + 1] == "file:///idx"
    assert cmd[-2:] == ["-r", str(LOCK_FILE)]
    assert cmd.count("--platform") == len(platform_tags())


@pytest.fixture
def consistent(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests exercise the download; the lock's agreement with the config has its own tests."""
    monkeypatch.setattr(check_image, "lock_problems", lambda cfg, packages: [])


def test_wheels_for_the_platform_download_and_hash_check(tmp_path: Path, consistent, capsys) -> None:
    url, hashes = index_with(
        tmp_path, [("alpha", "1.0", "cp312-cp312-manylinux_2_39_x86_64"), ("beta", "2.0", "py3-none-any")]
    )
    lock = tmp_path / "lock.txt"
    lock.write_text(
        render_lock([LockedPackage(n, v, (hashes[n],)) for n, v in (("alpha", "1.0"), ("beta", "2.0"))], "#\n")
    )
    dest = tmp_path / "dl"
    dest.mkdir()
    assert run(load_config(), lock, dest, index_url=url) == 0
    assert sorted(p.name for p in dest.iterdir()) == [
        "alpha-1.0-cp312-cp312-manylinux_2_39_x86_64.whl",
        "beta-2.0-py3-none-any.whl",
    ]
    assert "check-image: ok: 2 wheels" in capsys.readouterr().out


def test_a_wheel_only_for_a_newer_glibc_fails(tmp_path: Path, consistent, capsys) -> None:
    url, hashes = index_with(tmp_path, [("gamma", "1.0", "cp312-cp312-manylinux_2_40_x86_64")])
    lock = tmp_path / "lock.txt"
    lock.write_text(render_lock([LockedPackage("gamma", "1.0", (hashes["gamma"],))], "#\n"))
    assert run(load_config(), lock, tmp_path, index_url=url) == 1
    assert (
        "FAILED: pip could not download the locked wheels for CPython 3.12 on manylinux_2_39_x86_64"
        in capsys.readouterr().err
    )


def test_a_changed_hash_fails(tmp_path: Path, consistent, capsys) -> None:
    url, _ = index_with(tmp_path, [("delta", "1.0", "py3-none-any")])
    lock = tmp_path / "lock.txt"
    lock.write_text(render_lock([LockedPackage("delta", "1.0", ("0" * 64,))], "#\n"))
    assert run(load_config(), lock, tmp_path, index_url=url) == 1
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in capsys.readouterr().err


def test_an_inconsistent_lock_stops_before_downloading(tmp_path: Path, capsys) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text(render_lock([LockedPackage("torch", "2.10.0", ("0" * 64,))], "#\n"))
    assert run(load_config(), lock, tmp_path, index_url="file:///nonexistent") == 1
    err = capsys.readouterr().err
    assert "torch: locked 2.10.0, expected 2.11.0" in err and "python -m scripts.lock_image" in err
