"""image/checks.py: the build-time and preflight checks of the training image, on real and recorded inputs."""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from platform_config import load_config
from tests.helpers.training_runs import forked_stdout
from training.launch.prefork import LAUNCHER_MODULES

CHECKS_PATH = Path(__file__).resolve().parents[3] / "image" / "checks.py"
FLAGS_FILE = CHECKS_PATH.parent / "launcher-flags.txt"
#: ``ft_launcher --help`` of NVRx 0.7.0, as the argument parser of the 0.7.0 wheel prints it (80 columns).
NVRX_070_HELP = CHECKS_PATH.parents[1] / "docs" / "reference" / "ft_launcher-0.7.0-help.txt"
spec = importlib.util.spec_from_file_location("image_checks", CHECKS_PATH)
checks = importlib.util.module_from_spec(spec)
sys.modules["image_checks"] = checks
spec.loader.exec_module(checks)  # type: ignore[union-attr]

#: ``fi_info -l`` output as libfabric's util/info.c prints it (print_providers: "<name>:" then "    version: M.m").
FI_INFO_LIST = "efa:\n    version: 202.0\nshm:\n    version: 202.0\nofi_rxm:\n    version: 202.0\n"


def launcher_help(launcher: str) -> str:
    """``<launcher> --help`` of the installed launcher, its module run as its console script runs it, forked from the
    suite's worker template (which has imported it: about 2 CPU-s less than a fresh interpreter). The product's own
    :func:`help_text`, a subprocess of the console script, is run by the runtime-mode test below."""
    return forked_stdout(LAUNCHER_MODULES[launcher], ["--help"], timeout_s=60)


def test_flags_of_the_real_torchrun_are_accepted() -> None:
    flags = checks.read_flags(FLAGS_FILE)
    (result,) = checks.launcher_flag_checks({"torchrun": flags["torchrun"]}, launcher_help)
    assert result.ok, result.detail
    assert result.detail == f"{len(flags['torchrun'])} flags accepted"


def test_the_installed_nvrx_041_ft_launcher_lacks_the_070_flag() -> None:
    """What the image check is for: NVRx 0.4.1 (this .venv) has neither --ft-no-restart-exit-code nor
    --ft-gpu-memory-poll-interval; 0.7.0 has both."""
    flags = checks.read_flags(FLAGS_FILE)["ft_launcher"]
    assert {"--ft-no-restart-exit-code", "--ft-gpu-memory-poll-interval"} <= set(flags)
    (result,) = checks.launcher_flag_checks({"ft_launcher": flags}, launcher_help)
    assert not result.ok
    assert result.detail == "ft_launcher --help lacks --ft-gpu-memory-poll-interval, --ft-no-restart-exit-code"


def test_nvrx_070_ft_launcher_accepts_every_generated_flag() -> None:
    """The image's NVRx release declares every flag the charts pass to ft_launcher, --ft-no-restart-exit-code
    included (added after the 0.4 line): the build-time check passes and no pod exits 2 on an unknown flag."""
    assert load_config().image.nvrx_version == "0.7.0"  # the release whose help is recorded
    text = NVRX_070_HELP.read_text()
    assert text.startswith("usage: ft_launcher [-h] [--nnodes NNODES]")
    flags = checks.read_flags(FLAGS_FILE)["ft_launcher"]
    (result,) = checks.launcher_flag_checks({"ft_launcher": flags}, lambda launcher: text)
    assert result == checks.Result("flags:ft_launcher", True, "15 flags accepted")
    assert checks.flag_in_help("--ft-no-restart-exit-code", text)
    assert not checks.flag_in_help("--ft-no-such-flag", text)


def test_flag_declarations_not_mentions() -> None:
    text = (
        "usage: x [-h] [--nnodes NNODES] [--a | --b]\n"
        "options:\n"
        "  --nproc-per-node N, --nproc_per_node N\n"
        "  --run-path            Run with --no-python disabled.\n"
        "                        --max-restarts. is prose\n"
    )
    for flag in ("--nnodes", "--a", "--b", "--nproc-per-node", "--nproc_per_node", "--run-path"):
        assert checks.flag_in_help(flag, text), flag
    for flag in ("--no-python", "--max-restarts", "--nnode", "--nproc"):
        assert not checks.flag_in_help(flag, text), flag


def test_unrunnable_launcher_fails() -> None:
    (result,) = checks.launcher_flag_checks({"no-such-launcher-xyz": ["--x"]}, checks.help_text)
    assert not result.ok and "cannot run no-such-launcher-xyz --help" in result.detail


def test_efa_provider_listed() -> None:
    assert checks.efa_provider_check(FI_INFO_LIST) == checks.Result(
        "libfabric-efa", True, "providers: efa, shm, ofi_rxm"
    )
    missing = checks.efa_provider_check("tcp:\n    version: 202.0\n")
    assert not missing.ok and missing.detail == "providers: tcp"


def plugin(tmp_path: Path, text: bytes) -> Path:
    lib = tmp_path / "ofi" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl-net-ofi.so").write_bytes(b"\x7fELF" + text + b"\x00")
    return lib


def test_ofi_nccl_release_and_search_path(tmp_path: Path) -> None:
    lib = plugin(tmp_path, b"aws-ofi-nccl 1.21.1")
    env = {"NCCL_NET_PLUGIN": "ofi", "LD_LIBRARY_PATH": f"/nowhere:{lib}"}
    ok = checks.ofi_nccl_check("1.21.1", dirs=(str(lib),), environ=env)
    assert ok.ok and ok.detail.endswith(f"NCCL loads it from {lib}")
    assert "is not release 1.22.0" in checks.ofi_nccl_check("1.22.0", dirs=(str(lib),), environ=env).detail
    unset = checks.ofi_nccl_check("1.21.1", dirs=(str(lib),), environ={**env, "NCCL_NET_PLUGIN": ""})
    assert not unset.ok and "NCCL_NET_PLUGIN is ''" in unset.detail
    off_path = checks.ofi_nccl_check("1.21.1", dirs=(str(lib),), environ={**env, "LD_LIBRARY_PATH": "/nowhere"})
    assert not off_path.ok and "in no LD_LIBRARY_PATH directory" in off_path.detail
    absent = checks.ofi_nccl_check("1.21.1", dirs=(str(tmp_path / "none"),), environ=env)
    assert not absent.ok and "libnccl-net-ofi.so not in" in absent.detail


def test_plugin_not_loadable_here() -> None:
    result = checks.plugin_loads_check()
    assert not result.ok and "libnccl-net-ofi.so" in result.detail


def test_memlock() -> None:
    assert checks.memlock_check(resource.RLIM_INFINITY) == checks.Result("ulimit-l", True, "unlimited")
    assert checks.memlock_check(8 << 20) == checks.Result("ulimit-l", False, "8192 KiB")


def test_fsx_io_on_a_lustre_mount(tmp_path: Path) -> None:
    mounts = f"10.0.0.5@tcp:/abcd {tmp_path} lustre rw,flock 0 0\n/dev/root / ext4 rw 0 0\n"
    result = checks.fsx_check(tmp_path / "preflight", mounts, size=1 << 20)
    assert result == checks.Result("fsx-io", True, "1 MiB written and read back identical")
    assert list((tmp_path / "preflight").iterdir()) == []  # the probe file is removed


def test_fsx_refuses_a_non_lustre_directory(tmp_path: Path) -> None:
    result = checks.fsx_check(tmp_path, "/dev/root / ext4 rw 0 0\n")
    assert result == checks.Result("fsx-io", False, f"{tmp_path} is on ext4, not lustre")


@pytest.mark.parametrize(("code", "text"), [((2, 28, 9), "2.28.9"), (22809, "2.28.9"), ((2, 30, 4, "a"), "2.30.4")])
def test_nccl_version_text(code, text: str) -> None:
    assert checks.nccl_version_text(code) == text


def test_version_checks_name_what_differs() -> None:
    import torch

    results = {r.name: r for r in checks.version_checks("2.11.0", "13.0", "2.28.9", "0.7.0", "3.12")}
    assert not results["python"].ok and results["python"].detail == f"3.{sys.version_info.minor} (expected 3.12)"
    assert not results["torch"].ok and results["torch"].detail == f"{torch.__version__} (expected 2.11.0)"
    assert not results["cuda"].ok and results["cuda"].detail == "None (expected 13.0)"  # the CPU wheel
    assert not results["nccl"].ok and results["nccl"].detail.startswith("torch has no NCCL")
    assert not results["nvrx"].ok and results["nvrx"].detail == "0.4.1 (expected 0.7.0)"
    assert checks.expect("torch", "2.11.0+cu130", "2.11.0", prefix=True).ok
    assert not checks.expect("torch", "2.11.01", "2.11.0", prefix=True).ok


def test_runtime_mode_end_to_end_fails_loudly_outside_the_image(tmp_path: Path) -> None:
    """The launcher is a stand-in on PATH that prints a usage line (the real launchers' help is checked above): the
    check runs it as a subprocess, as in the image."""
    launcher = tmp_path / "bin" / "launcher-x"
    launcher.parent.mkdir()
    launcher.write_text("#!/bin/sh\necho 'usage: launcher-x [-h] [--nnodes NNODES]'\n")
    launcher.chmod(0o755)
    flags = tmp_path / "flags.txt"
    flags.write_text("launcher-x --nnodes\nlauncher-x --nproc-per-node\n")
    done = subprocess.run(
        [sys.executable, str(CHECKS_PATH), "runtime", "--flags", str(flags), "--ofi-nccl", "1.21.1"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{launcher.parent}{os.pathsep}{os.environ['PATH']}"},
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert "CHECK flags:launcher-x FAIL launcher-x --help lacks --nproc-per-node" in lines
    assert any(line.startswith("CHECK aws-ofi-nccl FAIL libnccl-net-ofi.so not in") for line in lines)
    assert lines[-1].startswith("CHECKS FAILED: flags:launcher-x, aws-ofi-nccl, aws-ofi-nccl-load")


def test_build_mode_needs_every_version(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(CHECKS_PATH),
            "build",
            "--flags",
            str(FLAGS_FILE),
            "--ofi-nccl",
            "1.21.1",
            "--torch",
            "2.11.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "build needs --cuda --nccl --nvrx --python" in done.stderr


def test_libraries_resolve_for_a_real_binary() -> None:
    result = checks.libraries_check("x", Path("/bin/ls"))
    assert result.ok and result.detail.startswith("/bin/ls: every library resolves")


def test_a_missing_library_is_named_but_the_drivers_are_allowed(tmp_path: Path) -> None:
    """A real shared object linked against a library that is then removed: ldd reports it not found."""
    (tmp_path / "dep.c").write_text("int dep(void) { return 1; }\n")
    (tmp_path / "use.c").write_text("int dep(void); int use(void) { return dep(); }\n")
    cc = ["cc", "-shared", "-fPIC", "-o"]
    subprocess.run([*cc, str(tmp_path / "libdep.so"), str(tmp_path / "dep.c")], check=True)
    subprocess.run([*cc, str(tmp_path / "libuse.so"), str(tmp_path / "use.c"), f"-L{tmp_path}", "-ldep"], check=True)
    (tmp_path / "libdep.so").unlink()
    result = checks.libraries_check("plugin", tmp_path / "libuse.so")
    assert not result.ok and result.detail.endswith("libdep.so not found")
    recorded = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibcuda.so.1 => not found\n\tlibnvidia-ml.so.1 => not found\n"
    assert checks.libraries_check("plugin", Path("/bin/ls"), run_ldd=lambda _: recorded).ok
    assert not checks.libraries_check("plugin", tmp_path / "absent.so").ok
