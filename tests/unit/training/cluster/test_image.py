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


def test_copy_flags_are_refused(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\nCOPY --from=builder /a /b\n")
    with pytest.raises(DockerfileError, match="--from"):
        LocalImage.from_dockerfile(tmp_path / "Dockerfile", tmp_path)


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
