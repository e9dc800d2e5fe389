"""``make check-image``: can every wheel of the training image exist for the image's platform?

A Docker build cannot run here, so this finds the failure a build would hit first, from the package index:

1. the lock file (``image/requirements.txt``) agrees with the configuration: torch, NCCL and NVRx at
   ``image.torch_version`` / ``image.nccl_version`` / ``image.nvrx_version``, the runtime pins of
   ``requirements.txt``, a sha256 for every entry (:func:`lock_problems`, also a unit test);
2. ``pip download --only-binary=:all: --no-deps --require-hashes`` of the whole lock for CPython 3.12 on
   manylinux up to glibc 2.39 (x86_64): a wheel that does not exist for that platform, or whose hash changed,
   fails here the way ``pip install`` in the Dockerfile would.

It needs the package index (https://pypi.org) and about 4 GB of downloads into a temporary directory (removed
afterwards unless ``--keep DIR``); it is not part of ``make test``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from platform_config import ProjectConfig, exits_on_config_error, load_config
from scripts.image_lock import (
    LOCK_FILE,
    REQUIREMENTS,
    LockedPackage,
    normalise,
    parse_lock,
    pip_target_args,
    platform_tags,
    runtime_pins,
)
from training.common.arguments import parse, problem


def lock_problems(cfg: ProjectConfig, packages: list[LockedPackage], requirements: Path = REQUIREMENTS) -> list[str]:
    """Disagreements between the lock and the configuration (empty = consistent)."""
    locked = {p.key: p for p in packages}
    expected = {
        "torch": cfg.image.torch_version,
        "nvidia-resiliency-ext": cfg.image.nvrx_version,
        f"nvidia-nccl-cu{cfg.image.cuda_version.split('.')[0]}": cfg.image.nccl_version,
    }
    for pin in runtime_pins(requirements):
        name, version = pin.split("==")
        expected[normalise(name)] = version
    problems = []
    for name, version in expected.items():
        got = locked.get(name)
        if got is None:
            problems.append(f"{name}: not in the lock (expected {version})")
        elif got.version != version:
            problems.append(f"{name}: locked {got.version}, expected {version}")
    problems += [f"{p.name}=={p.version}: no sha256 hash" for p in packages if not p.hashes]
    if len(locked) != len(packages):
        problems.append("a package appears more than once")
    return problems


def download_command(cfg: ProjectConfig, lock: Path, dest: Path, index_url: str | None = None) -> list[str]:
    """``pip download`` of every locked wheel for the image's platform, hash-checked, nothing resolved anew."""
    target = pip_target_args(cfg)
    if index_url is not None:
        target[target.index("--index-url") + 1] = index_url
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        "--require-hashes",
        "--progress-bar",
        "off",
        "--dest",
        str(dest),
        *target,
        "-r",
        str(lock),
    ]


def run(cfg: ProjectConfig, lock: Path, dest: Path, index_url: str | None = None) -> int:
    """Check the lock against ``cfg``, then download it into ``dest``; print a summary; return an exit status."""
    packages = parse_lock(lock)
    problems = lock_problems(cfg, packages)
    if problems:
        print(f"check-image: {lock} disagrees with the configuration:", *problems, sep="\n  - ", file=sys.stderr)
        print("  regenerate it with: python -m scripts.lock_image", file=sys.stderr)
        return 1
    result = subprocess.run(download_command(cfg, lock, dest, index_url), capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:], sep="\n", file=sys.stderr)
        print(
            f"check-image: FAILED: pip could not download the locked wheels for CPython {cfg.image.python_version} "
            f"on {platform_tags()[0]} (see above)",
            file=sys.stderr,
        )
        return 1
    wheels = sorted(dest.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels)
    print(
        f"check-image: ok: {len(wheels)} wheels ({size / 2**30:.2f} GiB) for CPython {cfg.image.python_version} on "
        f"{platform_tags()[0]} downloaded and hash-checked; torch {cfg.image.torch_version}, NCCL "
        f"{cfg.image.nccl_version}, NVRx {cfg.image.nvrx_version}"
    )
    return 0


def problems(args: argparse.Namespace) -> list[str]:
    """A lock file that is not there, a --keep that is not a directory."""
    lines = []
    if not args.lock.is_file():
        lines.append(
            problem("--lock", "the image's lock file (python -m scripts.lock_image writes it)", str(args.lock))
        )
    if args.keep is not None and args.keep.exists() and not args.keep.is_dir():
        lines.append(problem("--keep", "a directory, or a path to create one at", str(args.keep)))
    return lines


@exits_on_config_error
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.check_image", description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="default", help="project.yaml environment whose image.* to check")
    parser.add_argument("--lock", type=Path, default=LOCK_FILE)
    parser.add_argument("--keep", type=Path, help="download into this directory and keep it")
    args = parse(parser, argv, problems)
    cfg = load_config(env=args.env)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return run(cfg, args.lock, args.keep)
    tmp = Path(tempfile.mkdtemp(prefix="check-image-"))
    try:
        return run(cfg, args.lock, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
