"""The training image as the local cluster reads it from a Dockerfile: WORKDIR, ENV, COPY."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.training_runs import REPO_ROOT
from training.cluster.image import DockerfileError, LocalImage

DOCKERFILE = """# syntax=docker/dockerfile:1
FROM builder AS first
ENV IGNORED=1
WORKDIR /elsewhere
FROM base:1
ENV A=1 \\
    B="two words" \\
    C=3
ENV LEGACY value with spaces
ENV D=${A}:$C:${UNSET}
WORKDIR /app
WORKDIR sub
COPY project.yaml ./project.yaml
COPY pkg/ ./pkg/
COPY one.txt two.txt /opt/
RUN echo not reproduced
"""


def test_the_last_stage_is_read(tmp_path):
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    image = LocalImage.from_dockerfile(tmp_path / "Dockerfile", tmp_path)
    assert image.workdir == "/app/sub"
    assert image.env == {"A": "1", "B": "two words", "C": "3", "LEGACY": "value with spaces", "D": "1:3:"}
    assert image.copies == [
        (tmp_path / "project.yaml", "/app/sub/project.yaml"),
        (tmp_path / "pkg/", "/app/sub/pkg"),
        (tmp_path / "one.txt", "/opt/one.txt"),
        (tmp_path / "two.txt", "/opt/two.txt"),
    ]
    with pytest.raises(DockerfileError, match="does not exist"):
        image.mounts()


def test_copy_flags_other_than_from_are_refused(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\nCOPY --chown=1000 a /b\n")
    with pytest.raises(DockerfileError, match="--chown"):
        LocalImage.from_dockerfile(tmp_path / "Dockerfile", tmp_path)


def test_a_stage_from_an_earlier_one_inherits_it_and_copies_from_stages_are_skipped(tmp_path):
    """training/Dockerfile's shape: a runtime stage, a build stage copying from it, the last stage ``FROM runtime``
    copying the build's output (another stage's files: this machine's at that path, locally)."""
    (tmp_path / "Dockerfile").write_text(
        "FROM base AS runtime\nENV PATH=/opt/venv/bin:/usr/bin A=1\nWORKDIR /opt\nCOPY r.txt ./\n"
        "FROM build AS tests\nCOPY --from=runtime /opt/amazon/openmpi /opt/amazon/openmpi\nENV B=2\n"
        "FROM runtime\nCOPY --from=tests /opt/nccl-tests /opt/nccl-tests\nWORKDIR /workspace\nCOPY t.txt ./\n"
    )
    image = LocalImage.from_dockerfile(tmp_path / "Dockerfile", tmp_path)
    assert image.workdir == "/workspace"
    assert image.env == {"PATH": "/opt/venv/bin:/usr/bin", "A": "1"}  # the runtime stage's, not the build stage's
    assert image.copies == [(tmp_path / "r.txt", "/opt/r.txt"), (tmp_path / "t.txt", "/workspace/t.txt")]


def test_the_training_image_copies_what_the_pods_import(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    image = LocalImage.from_dockerfile(REPO_ROOT / "training" / "Dockerfile", REPO_ROOT)
    assert image.workdir == "/workspace"
    targets = {target: src for src, target in image.copies}
    assert targets["/workspace/training"] == REPO_ROOT / "training/"
    assert targets["/workspace/platform_config"] == REPO_ROOT / "platform_config/"
    assert all(m.read_only and m.kind == "bind" for m in image.mounts())
    env = image.container_env(Path("/venv/bin"))
    assert env["PATH"].startswith("/venv/bin:") and env["PYTHONPATH"] == "/workspace"
    assert env["OMP_NUM_THREADS"] == "1"


def test_this_interpreters_extra_packages_follow_the_images_pythonpath(monkeypatch, tmp_path):
    """Wheels installed with ``pip --target SITE`` (the GPU machines' NVRx) stand in for the image's venv too, their
    console scripts (``SITE/bin/ft_launcher``) included; the repository itself is the image's /workspace, so it is
    not added."""
    site, no_scripts = tmp_path / "site", tmp_path / "plain"
    (site / "bin").mkdir(parents=True)
    no_scripts.mkdir()
    monkeypatch.setenv("PYTHONPATH", f"{site}:{no_scripts}:{REPO_ROOT}")
    env = LocalImage("/workspace", {"PYTHONPATH": "/workspace"}).container_env(Path("/venv/bin"))
    assert env["PYTHONPATH"] == f"/workspace:{site}:{no_scripts}"
    assert env["PATH"] == f"/venv/bin:{site}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
