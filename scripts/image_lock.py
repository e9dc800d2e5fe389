"""The training image's Python lock file (``image/requirements.txt``) and the pip target of the image's platform.

The image installs exactly this file with ``pip install --require-hashes --no-deps --only-binary=:all:``: every
package (torch, its CUDA 13 and NCCL wheels, NVRx and their dependencies) pinned to one version with its sha256.
``scripts/lock_image.py`` writes it (it needs the package index) by resolving :func:`direct_requirements` for the
image's platform; ``scripts/check_image.py`` (``make check-image``) downloads every locked wheel for that platform,
so a wheel that cannot exist there (e.g. NVRx's ``manylinux_2_39`` wheels on an older glibc) is found before a
Docker build; ``tests/unit/scripts/test_image_lock.py`` checks offline that the lock agrees with the configuration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from platform_config import ProjectConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCK_FILE = REPO_ROOT / "image" / "requirements.txt"
REQUIREMENTS = REPO_ROOT / "requirements.txt"
#: glibc of the image's OS (Ubuntu 24.04, the base image of ``image.base_image``).
IMAGE_GLIBC = (2, 39)
#: Oldest manylinux glibc a wheel may target (manylinux2014 = manylinux_2_17).
OLDEST_MANYLINUX_GLIBC = 17
ARCH = "x86_64"
#: Packages the image needs besides torch and NVRx (platform_config/, training/): versions from requirements.txt.
RUNTIME_PACKAGES = ("pydantic", "PyYAML", "safetensors", "tokenizers", "huggingface_hub")
#: The public index the lock is resolved against.
INDEX_URL = "https://pypi.org/simple"


def platform_tags(glibc: tuple[int, int] = IMAGE_GLIBC, arch: str = ARCH) -> list[str]:
    """Wheel platform tags a pip on the image accepts, most specific first (manylinux_2_39 .. 2_17, manylinux2014)."""
    major, minor = glibc
    tags = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, OLDEST_MANYLINUX_GLIBC - 1, -1)]
    return [*tags, f"manylinux2014_{arch}"]


def pip_target_args(cfg: ProjectConfig) -> list[str]:
    """pip options that make it resolve/download for the image instead of this machine: binary wheels only, the
    image's CPython ABI and platform tags, the public index, no local pip configuration."""
    version = cfg.image.python_version.replace(".", "")
    args = ["--isolated", "--index-url", INDEX_URL, "--only-binary=:all:", "--implementation", "cp"]
    args += ["--python-version", cfg.image.python_version, "--abi", f"cp{version}"]
    for tag in platform_tags():
        args += ["--platform", tag]
    return args


def requirement_pins(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """``name`` (lower case) -> ``name==version`` of every ``==`` pin in ``requirements``."""
    pins = {}
    for line in requirements.read_text().splitlines():
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)==([^\s;#]+).*", line)
        if m:
            pins[m.group(1).lower()] = f"{m.group(1)}=={m.group(2)}"
    return pins


def runtime_pins(requirements: Path = REQUIREMENTS) -> list[str]:
    """``name==version`` of each :data:`RUNTIME_PACKAGES` entry, as pinned in ``requirements.txt``."""
    pins = requirement_pins(requirements)
    missing = [p for p in RUNTIME_PACKAGES if p.lower() not in pins]
    if missing:
        raise ValueError(f"{requirements} has no '==' pin for {missing}")
    return [pins[p.lower()] for p in RUNTIME_PACKAGES]


def direct_requirements(cfg: ProjectConfig, requirements: Path = REQUIREMENTS) -> list[str]:
    """What the image needs directly: torch and NVRx at the configured versions, plus :func:`runtime_pins`."""
    return [
        f"torch=={cfg.image.torch_version}",
        f"nvidia-resiliency-ext=={cfg.image.nvrx_version}",
        *runtime_pins(requirements),
    ]


@dataclass(frozen=True)
class LockedPackage:
    """One entry of the lock file."""

    name: str
    version: str
    hashes: tuple[str, ...]

    @property
    def key(self) -> str:
        """The normalised project name (PEP 503)."""
        return normalise(self.name)


def normalise(name: str) -> str:
    """PEP 503 name normalisation (``PyYAML`` -> ``pyyaml``, ``huggingface_hub`` -> ``huggingface-hub``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(path: Path = LOCK_FILE) -> list[LockedPackage]:
    """Entries of a hashed requirements file (``name==version \\`` followed by ``--hash=sha256:...`` lines)."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})*)", line)
        if not m:
            raise ValueError(f"{path}: cannot parse {line!r} (expected 'name==version --hash=sha256:...')")
        hashes = tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", m.group(3)))
        out.append(LockedPackage(name=m.group(1), version=m.group(2), hashes=hashes))
    return out


def render_lock(packages: list[LockedPackage], header: str) -> str:
    """The lock file text, sorted by name, one hash line per hash."""
    lines = [header.rstrip("\n")]
    for p in sorted(packages, key=lambda p: p.key):
        lines.append(f"{p.name}=={p.version} \\")
        lines += [f"    --hash=sha256:{h}" + (" \\" if i < len(p.hashes) - 1 else "") for i, h in enumerate(p.hashes)]
    return "\n".join(lines) + "\n"
