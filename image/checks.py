"""Checks of the training image, run by ``training/Dockerfile`` at build time and by ``make preflight`` in a pod.

    python3 /opt/image/checks.py build   --flags FILE --torch V --cuda V --nccl V --nvrx V --python V --ofi-nccl V
                                         [--nccl-tests BINARY]
    python3 /opt/image/checks.py runtime --flags FILE --ofi-nccl V [--fsx-dir DIR]

Each check prints one line ``CHECK <name> ok <detail>`` or ``CHECK <name> FAIL <detail>``; the script exits 1 when
any check fails, so a Docker build stops loudly and the preflight pod fails. Standard library only (it runs in the
image's Python and in the repository's tests).

``build``: the versions of Python, torch (and its CUDA), NCCL and NVRx; every launcher flag the charts generate
(``image/launcher-flags.txt``) appears in that launcher's ``--help``; libfabric lists its ``efa`` provider
(``fi_info -l``: a provider registers without an EFA device); the aws-ofi-nccl plugin of the expected release is
where ``NCCL_NET_PLUGIN=ofi`` makes NCCL look for it; every shared library the plugin (and, with ``--nccl-tests``,
nccl-tests' ``all_reduce_perf``) needs resolves (``ldd``), except the GPU driver's, which the container runtime
mounts on the node (:data:`DRIVER_LIBRARIES`).

``runtime`` (on a node, inside the deployed image): the launcher flags and the plugin again, the plugin loads
(``dlopen`` with the driver present), ``ulimit -l`` is unlimited (EFA registers pinned memory), and, with
``--fsx-dir``, a file written to the FSx for Lustre mount reads back identical (the node's Lustre client and
kernel agree) and the directory is on a ``lustre`` mount.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Where the EFA installer puts the aws-ofi-nccl plugin: /opt/amazon/ofi-nccl/lib since EFA installer 1.50,
#: a per-architecture subdirectory before.
OFI_NCCL_DIRS = ("/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu")
#: ``NCCL_NET_PLUGIN`` of the image: NCCL then dlopens ``libnccl-net-ofi.so`` from the library search path
#: (``LD_LIBRARY_PATH`` of the image holds the installer's directories). The tuner lives in the same library.
NCCL_NET_PLUGIN = "ofi"
OFI_NCCL_PLUGIN = f"libnccl-net-{NCCL_NET_PLUGIN}.so"
FI_INFO = "/opt/amazon/efa/bin/fi_info"
#: Libraries of the NVIDIA driver: absent at build time, mounted into the container on a GPU node.
DRIVER_LIBRARIES = frozenset({"libcuda.so.1", "libnvidia-ml.so.1"})


@dataclass(frozen=True)
class Result:
    """The outcome of one check."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"CHECK {self.name} {'ok' if self.ok else 'FAIL'} {self.detail}"


def expect(name: str, got: str, want: str, *, prefix: bool = False) -> Result:
    """``got`` equals ``want`` (or starts with ``want + '+'``/``want + '.'`` with ``prefix``)."""
    ok = got == want or (prefix and (got.startswith(want + "+") or got.startswith(want + ".")))
    return Result(name, ok, f"{got} (expected {want})")


def nccl_version_text(code: int | tuple[int, ...]) -> str:
    """``torch.cuda.nccl.version()`` (a tuple, or an int like 22809 in old torch) as ``2.28.9``."""
    if isinstance(code, tuple):
        return ".".join(str(p) for p in code[:3])
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def version_checks(torch_v: str, cuda_v: str, nccl_v: str, nvrx_v: str, python_v: str) -> list[Result]:
    """Python, torch, CUDA, NCCL and NVRx versions of this interpreter's environment."""
    from importlib.metadata import PackageNotFoundError, version

    results = [expect("python", f"{sys.version_info.major}.{sys.version_info.minor}", python_v)]
    try:
        import torch
    except Exception as exc:  # any import failure is a failed check
        results.append(Result("torch", False, f"cannot import torch: {exc!r}"))
    else:
        results.append(expect("torch", torch.__version__, torch_v, prefix=True))
        results.append(expect("cuda", str(torch.version.cuda), cuda_v))
        try:
            results.append(expect("nccl", nccl_version_text(torch.cuda.nccl.version()), nccl_v))
        except Exception as exc:  # a torch without NCCL fails the check
            results.append(Result("nccl", False, f"torch has no NCCL: {exc!r}"))
    try:
        results.append(expect("nvrx", version("nvidia-resiliency-ext"), nvrx_v))
    except PackageNotFoundError:
        results.append(Result("nvrx", False, "nvidia-resiliency-ext is not installed"))
    return results


def read_flags(path: Path) -> dict[str, list[str]]:
    """``image/launcher-flags.txt``: launcher -> flags."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            launcher, flag = line.split()
            out.setdefault(launcher, []).append(flag)
    return out


def flag_in_help(flag: str, help_text: str) -> bool:
    """``flag`` is declared by the help text: in the usage (``[--name``, ``| --name``) or at the start of an option
    line (``  --name VALUE, --alias VALUE``), not merely mentioned in a description."""
    pattern = rf"(?:^[ \t]+|\[|\| |, ){re.escape(flag)}(?=[ \t,=\]]|$)"
    return re.search(pattern, help_text, re.MULTILINE) is not None


def launcher_flag_checks(flags: dict[str, list[str]], run_help: Callable[[str], str]) -> list[Result]:
    """One result per launcher: every generated flag appears in its ``--help`` (``run_help(launcher)``)."""
    results = []
    for launcher, names in flags.items():
        try:
            text = run_help(launcher)
        except (OSError, subprocess.SubprocessError) as exc:
            results.append(Result(f"flags:{launcher}", False, f"cannot run {launcher} --help: {exc}"))
            continue
        missing = [f for f in names if not flag_in_help(f, text)]
        detail = f"{len(names)} flags accepted" if not missing else f"{launcher} --help lacks {', '.join(missing)}"
        results.append(Result(f"flags:{launcher}", not missing, detail))
    return results


def help_text(launcher: str) -> str:
    """``<launcher> --help`` output (argparse exits 0)."""
    done = subprocess.run([launcher, "--help"], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout + done.stderr


def efa_provider_check(list_output: str) -> Result:
    """``fi_info -l`` lists ``efa:`` (the provider is built into libfabric and registered, device or not)."""
    providers = re.findall(r"^([A-Za-z0-9_;-]+):\s*$", list_output, re.MULTILINE)
    return Result("libfabric-efa", "efa" in providers, f"providers: {', '.join(providers) or 'none'}")


def find_plugin(dirs: tuple[str, ...] = OFI_NCCL_DIRS) -> Path | None:
    """The aws-ofi-nccl plugin in the installer's directories."""
    for d in dirs:
        candidate = Path(d) / OFI_NCCL_PLUGIN
        if candidate.is_file():
            return candidate
    return None


def ofi_nccl_check(
    version: str, dirs: tuple[str, ...] = OFI_NCCL_DIRS, environ: dict[str, str] | None = None
) -> Result:
    """The plugin exists, carries ``aws-ofi-nccl <version>``, ``NCCL_NET_PLUGIN`` names it, and a directory of
    ``LD_LIBRARY_PATH`` holds it (where NCCL's ``dlopen`` looks)."""
    env = os.environ if environ is None else environ
    plugin = find_plugin(dirs)
    if plugin is None:
        return Result("aws-ofi-nccl", False, f"{OFI_NCCL_PLUGIN} not in {', '.join(dirs)}")
    if f"aws-ofi-nccl {version}".encode() not in plugin.read_bytes():
        return Result("aws-ofi-nccl", False, f"{plugin} is not release {version}")
    if env.get("NCCL_NET_PLUGIN") != NCCL_NET_PLUGIN:
        return Result(
            "aws-ofi-nccl", False, f"NCCL_NET_PLUGIN is {env.get('NCCL_NET_PLUGIN')!r}, not {NCCL_NET_PLUGIN!r}"
        )
    path = env.get("LD_LIBRARY_PATH", "")
    reachable = [d for d in path.split(":") if d and (Path(d) / OFI_NCCL_PLUGIN).is_file()]
    if not reachable:
        return Result("aws-ofi-nccl", False, f"{OFI_NCCL_PLUGIN} is in no LD_LIBRARY_PATH directory ({path})")
    return Result("aws-ofi-nccl", True, f"{plugin} is {version}; NCCL loads it from {reachable[0]}")


def unresolved_libraries(ldd_output: str) -> list[str]:
    """The ``<name> => not found`` entries of ``ldd`` output."""
    return re.findall(r"^\s*(\S+) => not found", ldd_output, re.MULTILINE)


def libraries_check(name: str, path: Path, run_ldd: Callable[[Path], str] | None = None) -> Result:
    """Every shared library ``path`` needs resolves, apart from :data:`DRIVER_LIBRARIES`."""
    if not path.is_file():
        return Result(name, False, f"{path} does not exist")
    try:
        out = run_ldd(path) if run_ldd is not None else _ldd(path)
    except (OSError, subprocess.SubprocessError) as exc:
        return Result(name, False, f"ldd {path}: {exc}")
    missing = [lib for lib in unresolved_libraries(out) if lib not in DRIVER_LIBRARIES]
    if missing:
        return Result(name, False, f"{path}: {', '.join(missing)} not found")
    return Result(name, True, f"{path}: every library resolves (the driver's come from the node)")


def _ldd(path: Path) -> str:
    done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def plugin_loads_check() -> Result:
    """NCCL's ``dlopen`` of the plugin succeeds (it needs the driver's libraries, so only at run time)."""
    try:
        ctypes.CDLL(OFI_NCCL_PLUGIN)
    except OSError as exc:
        return Result("aws-ofi-nccl-load", False, str(exc))
    return Result("aws-ofi-nccl-load", True, f"dlopen({OFI_NCCL_PLUGIN}) ok")


def memlock_check(limit: int | None = None) -> Result:
    """``ulimit -l`` is unlimited (libfabric pins the buffers it registers with EFA)."""
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0] if limit is None else limit
    shown = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft // 1024} KiB"
    return Result("ulimit-l", soft == resource.RLIM_INFINITY, shown)


def mount_type(path: Path, mounts: str | None = None) -> str:
    """File system type of the longest mount point above ``path`` (``mounts``: ``/proc/mounts`` text)."""
    text = Path("/proc/mounts").read_text() if mounts is None else mounts
    best, fstype = "", "unknown"
    target = str(path.resolve())
    for line in text.splitlines():
        parts = line.split()
        under = len(parts) >= 3 and (target == parts[1] or target.startswith(parts[1].rstrip("/") + "/"))
        if under and len(parts[1]) > len(best):
            best, fstype = parts[1], parts[2]
    return fstype


def fsx_check(directory: Path, mounts: str | None = None, size: int = 4 << 20) -> Result:
    """Write ``size`` random bytes under ``directory``, fsync, read back, compare sha256, remove; report the
    mount type (``lustre`` expected)."""
    fstype = mount_type(directory, mounts)
    if fstype != "lustre":
        return Result("fsx-io", False, f"{directory} is on {fstype}, not lustre")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"preflight-{socket.gethostname()}-{os.getpid()}.bin"
        data = os.urandom(size)
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        same = hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(data).digest()
        path.unlink()
    except OSError as exc:
        return Result("fsx-io", False, f"{directory}: {exc}")
    return Result("fsx-io", same, f"{size >> 20} MiB written and read back {'identical' if same else 'DIFFERENT'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["build", "runtime"])
    parser.add_argument("--flags", type=Path, required=True, help="image/launcher-flags.txt")
    parser.add_argument("--ofi-nccl", required=True, help="expected aws-ofi-nccl release")
    for name in ("torch", "cuda", "nccl", "nvrx", "python"):
        parser.add_argument(f"--{name}", help=f"expected {name} version (build)")
    parser.add_argument("--fsx-dir", type=Path, help="runtime: a directory on the FSx mount to write and read")
    parser.add_argument("--nccl-tests", type=Path, help="build: nccl-tests' all_reduce_perf, whose libraries to check")
    args = parser.parse_args(argv)

    results: list[Result] = []
    if args.mode == "build":
        missing = [n for n in ("torch", "cuda", "nccl", "nvrx", "python") if getattr(args, n) is None]
        if missing:
            parser.error(f"build needs --{' --'.join(missing)}")
        results += version_checks(args.torch, args.cuda, args.nccl, args.nvrx, args.python)
        fi_info = shutil.which("fi_info") or FI_INFO
        listed = subprocess.run([fi_info, "-l"], capture_output=True, text=True, timeout=60)
        results.append(efa_provider_check(listed.stdout))
    results += launcher_flag_checks(read_flags(args.flags), help_text)
    results.append(ofi_nccl_check(args.ofi_nccl))
    if args.mode == "build":
        plugin = find_plugin()
        results.append(libraries_check("ofi-nccl-libraries", plugin or Path(OFI_NCCL_DIRS[0]) / OFI_NCCL_PLUGIN))
        if args.nccl_tests is not None:
            results.append(libraries_check("nccl-tests-libraries", args.nccl_tests))
    if args.mode == "runtime":
        results += [plugin_loads_check(), memlock_check()]
        if args.fsx_dir is not None:
            results.append(fsx_check(args.fsx_dir))
    for r in results:
        print(r.line(), flush=True)
    failed = [r.name for r in results if not r.ok]
    print(f"CHECKS {'FAILED: ' + ', '.join(failed) if failed else 'passed'} ({len(results)} checks)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
