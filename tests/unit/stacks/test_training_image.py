"""The training image asset: Dockerfile, build arguments from config, the staged build context."""

from __future__ import annotations

import json
import re
from pathlib import Path

from platform_config import ProjectConfig, config_from_dict, load_config
from stacks.training_image import DOCKERFILE, REPO_ROOT, build_args
from tests.helpers.stack_synth import Synthesized

TEXT = (REPO_ROOT / DOCKERFILE).read_text()


def dockerfile_args() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", TEXT, re.MULTILINE))


def test_build_args_from_config() -> None:
    cfg = load_config()
    assert build_args(cfg) == {
        "BASE_IMAGE": (
            "nvcr.io/nvidia/cuda:13.0.2-base-ubuntu24.04"
            "@sha256:2ab6381d970b211fb93853796dc6707eb8a72575a375c422b17cf4d8b2641701"
        ),
        "BUILD_IMAGE": (
            "nvcr.io/nvidia/cuda:13.0.2-devel-ubuntu24.04"
            "@sha256:5dc1bca23d05bd37b011be68ec470c03b403a5da07ec3a86e41af9470e9d0cc6"
        ),
        "NCCL_TESTS_COMMIT": "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432",
        "UBUNTU_SNAPSHOT": cfg.image.ubuntu_snapshot,
        "EFA_INSTALLER_VERSION": "1.50.0",
        "AWS_OFI_NCCL_VERSION": "1.21.1",
        "PYTHON_VERSION": "3.12",
        "TORCH_VERSION": "2.11.0",
        "TORCH_CUDA_VERSION": "13.0",
        "NCCL_VERSION": "2.28.9",
        "NVRX_VERSION": "0.7.0",
    }


def test_every_build_arg_is_declared_with_the_config_default() -> None:
    """A manual ``docker build`` without arguments builds what the CDK asset builds."""
    declared = dockerfile_args()
    for name, value in build_args(ProjectConfig()).items():
        assert declared.get(name) == value, name
    assert TEXT.index("ARG BASE_IMAGE=") < TEXT.index("FROM ${BASE_IMAGE}")
    # Every stage redeclares (without a value) the global arguments it uses, so the defaults above reach it.
    stages = re.split(r"^FROM .*$", TEXT, flags=re.MULTILINE)[1:]
    for stage in stages:
        for used in set(re.findall(r"\$\{(\w+)\}", stage)) & declared.keys():
            assert re.search(rf"^ARG {used}$", stage, re.MULTILINE), used


def test_base_images_are_public_ubuntu_2404_pinned_by_digest() -> None:
    for name in ("BASE_IMAGE", "BUILD_IMAGE"):
        image, digest = dockerfile_args()[name].split("@sha256:")
        assert image.startswith("nvcr.io/nvidia/cuda:13.0.2-") and image.endswith("-ubuntu24.04")  # glibc 2.39
        assert re.fullmatch(r"[0-9a-f]{64}", digest)


def test_a_tag_without_digest_is_refused() -> None:
    import pytest

    from platform_config import ConfigError

    with pytest.raises(ConfigError, match="must be pinned by digest"):
        config_from_dict({"image": {"base_image": "nvcr.io/nvidia/cuda:13.0.2-base-ubuntu24.04"}})


def test_no_pipe_into_grep_q_under_pipefail() -> None:
    """``cmd | grep -q`` under ``pipefail`` fails at random: grep exits on its first match, cmd gets SIGPIPE."""
    assert 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]' in TEXT
    instructions = "\n".join(line for line in TEXT.splitlines() if not line.startswith("#"))
    assert not re.search(r"\|\s*grep\s+-\w*q", instructions)
    assert '> gpg-status.txt \\\n && grep -Eq "^\\[GNUPG:\\] VALIDSIG .*${EFA_KEY_FINGERPRINT}" gpg-status.txt' in TEXT


def test_nccl_tests_built_at_the_pinned_commit_with_mpi_against_the_wheels_nccl() -> None:
    assert 'git fetch -q --depth 1 https://github.com/NVIDIA/nccl-tests.git "${NCCL_TESTS_COMMIT}"' in TEXT
    assert 'test "$(git rev-parse HEAD)" = "${NCCL_TESTS_COMMIT}"' in TEXT
    assert "MPI=1 MPI_HOME=/opt/amazon/openmpi CUDA_HOME=/usr/local/cuda NCCL_HOME=/opt/nccl" in TEXT
    assert "COPY --from=runtime /opt/venv/lib/python3.12/site-packages/nvidia/nccl /opt/nccl" in TEXT
    assert "COPY --from=nccl-tests /opt/nccl-tests /opt/nccl-tests" in TEXT
    assert "--nccl-tests /opt/nccl-tests/all_reduce_perf" in TEXT


def test_apt_from_a_snapshot_and_efa_installer_signature_checked() -> None:
    assert 'echo "APT::Snapshot \\"${UBUNTU_SNAPSHOT}\\";" > /etc/apt/apt.conf.d/50snapshot' in TEXT
    assert "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz.sig" in TEXT
    assert "ARG EFA_KEY_FINGERPRINT=4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC" in TEXT
    assert 'VALIDSIG .*${EFA_KEY_FINGERPRINT}"' in TEXT
    assert "./efa_installer.sh -y -g --skip-kmod --skip-limit-conf --no-verify --disable-ngc" in TEXT


def test_python_packages_only_from_the_hashed_lock() -> None:
    assert "COPY image/requirements.txt image/launcher-flags.txt image/checks.py image/rsh.py /opt/image/" in TEXT
    assert (
        "pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: -r /opt/image/requirements.txt"
        in TEXT
    )
    assert TEXT.count("pip install") == 1


def test_build_time_checks_get_every_expected_version() -> None:
    run = re.search(r"RUN python3 /opt/image/checks.py build (.+?)\n\n", TEXT, re.DOTALL)
    assert run is not None
    command = run.group(1)
    assert "--flags /opt/image/launcher-flags.txt" in command
    for option, arg in {
        "--python": "PYTHON_VERSION",
        "--torch": "TORCH_VERSION",
        "--cuda": "TORCH_CUDA_VERSION",
        "--nccl": "NCCL_VERSION",
        "--nvrx": "NVRX_VERSION",
        "--ofi-nccl": "AWS_OFI_NCCL_VERSION",
    }.items():
        assert f'{option} "${{{arg}}}"' in command


def test_nccl_finds_the_ofi_plugin() -> None:
    assert "NCCL_NET_PLUGIN=ofi" in TEXT
    assert "LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:" in TEXT
    assert "NCCL_TUNER_PLUGIN" not in TEXT  # the tuner comes from the net plugin


def test_dockerfile_copies_the_packages() -> None:
    for copied in ("project.yaml", "platform_config/", "training/"):
        assert f"COPY {copied}" in TEXT


def test_asset_stages_only_the_image_inputs(default_env: Synthesized) -> None:
    manifest = json.loads((default_env.outdir / "fsdp-resilience-image.assets.json").read_text())
    (image,) = manifest["dockerImages"].values()
    src = image["source"]
    assert src["dockerFile"] == DOCKERFILE
    assert src["platform"] == "linux/amd64"
    assert src["dockerBuildArgs"] == build_args(default_env.cfg)
    staged = default_env.outdir / src["directory"]
    top = sorted(p.name for p in staged.iterdir())
    assert top == ["image", "platform_config", "project.yaml", "training"]
    assert sorted(p.name for p in (staged / "image").iterdir()) == [
        "checks.py",
        "launcher-flags.txt",
        "requirements.txt",
        "rsh.py",
    ]
    assert not list(staged.rglob("__pycache__"))


def test_uri_override_skips_the_asset(tmp_path: Path) -> None:
    import aws_cdk as cdk

    from stacks.training_image import TrainingImage, TrainingImageProps

    cfg = config_from_dict({"image": {"uri_override": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1"}})
    image = TrainingImage(cdk.Stack(cdk.App(outdir=str(tmp_path))), "I", TrainingImageProps(cfg=cfg))
    assert image.asset is None and image.image_uri == cfg.image.uri_override
