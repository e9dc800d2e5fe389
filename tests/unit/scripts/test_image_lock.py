"""The image lock file: it agrees with the configuration, every entry is hashed, and the pip target is the image's."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_config import load_config
from scripts.check_image import lock_problems
from scripts.image_lock import (
    LOCK_FILE,
    LockedPackage,
    direct_requirements,
    normalise,
    parse_lock,
    pip_target_args,
    platform_tags,
    render_lock,
    requirement_pins,
    runtime_pins,
)


def test_committed_lock_matches_the_configuration() -> None:
    cfg = load_config()
    packages = parse_lock(LOCK_FILE)
    assert lock_problems(cfg, packages) == []
    versions = {p.key: p.version for p in packages}
    assert versions["torch"] == "2.11.0" and versions["nvidia-nccl-cu13"] == "2.28.9"
    assert versions["nvidia-resiliency-ext"] == "0.7.0"
    assert all(len(p.hashes) == 1 for p in packages)


def test_lock_is_what_render_writes() -> None:
    text = LOCK_FILE.read_text()
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    assert render_lock(parse_lock(LOCK_FILE), header) == text


def test_platform_tags_cover_glibc_239_down_to_manylinux2014() -> None:
    tags = platform_tags()
    assert tags[0] == "manylinux_2_39_x86_64" and tags[-2:] == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    assert "manylinux_2_28_x86_64" in tags and len(tags) == 39 - 17 + 1 + 1


def test_pip_targets_the_image_not_this_machine() -> None:
    args = pip_target_args(load_config())
    assert args[:3] == ["--isolated", "--index-url", "https://pypi.org/simple"]
    assert "--only-binary=:all:" in args
    assert args[args.index("--python-version") + 1] == "3.12" and args[args.index("--abi") + 1] == "cp312"
    assert args.count("--platform") == len(platform_tags())


def test_direct_requirements_come_from_the_config_and_requirements_txt() -> None:
    assert direct_requirements(load_config()) == [
        "torch==2.11.0",
        "nvidia-resiliency-ext==0.7.0",
        "pydantic==2.14.4",
        "PyYAML==6.0.4",
        "safetensors==0.8.0",
        "tokenizers==0.23.3",
        "huggingface_hub==2.4.0",
    ]


def test_runtime_pins_follow_requirements(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text(
        "pydantic==9.9.9\nPyYAML==1.2.3  # comment\nother==1\nsafetensors==0.1\ntokenizers==0.2\nhuggingface_hub==0.3\n"
    )
    assert runtime_pins(req) == [
        "pydantic==9.9.9",
        "PyYAML==1.2.3",
        "safetensors==0.1",
        "tokenizers==0.2",
        "huggingface_hub==0.3",
    ]
    assert requirement_pins(req)["other"] == "other==1"
    req.write_text("pydantic==9.9.9\nPyYAML==1.2.3\n")
    with pytest.raises(ValueError, match="no '==' pin for"):
        runtime_pins(req)


def test_parse_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "lock.txt"
    bad.write_text("torch>=2.11\n")
    with pytest.raises(ValueError, match=r"cannot parse 'torch>=2.11'"):
        parse_lock(bad)


def test_normalise() -> None:
    assert [normalise(n) for n in ("PyYAML", "huggingface_hub", "Foo.Bar")] == ["pyyaml", "huggingface-hub", "foo-bar"]


def test_lock_problems_name_each_disagreement() -> None:
    cfg = load_config()
    packages = [p for p in parse_lock(LOCK_FILE) if p.key != "tokenizers"]
    packages = [LockedPackage(p.name, "2.10.0", p.hashes) if p.key == "torch" else p for p in packages]
    packages.append(LockedPackage("extra", "1.0", ()))
    assert lock_problems(cfg, packages) == [
        "torch: locked 2.10.0, expected 2.11.0",
        "tokenizers: not in the lock (expected 0.23.3)",
        "extra==1.0: no sha256 hash",
    ]
