"""The training image as the local cluster sees it: ``training/Dockerfile``'s WORKDIR, ENV and COPY lines.

A pod's file system is this machine's (see :mod:`training.cluster.sandbox`), so "the image" is reduced to what the
Dockerfile adds on top of its base: the environment it sets, its working directory, and the files it copies, which
are bind-mounted read-only at the same places (a module the image does not copy is missing in the local pod too).
The base image's Python becomes this checkout's virtual environment, first on ``PATH``.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from training.cluster.sandbox import Mount

#: PATH of the base image besides the virtual environment.
REPO = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: What the local CPU cluster adds to every container: one thread per worker on a small machine, and a stack dump of
#: a worker that makes no progress for 10 s (training/resilience/stall_dump.py), in the pod's log.
LOCAL_ENV = {
    "OMP_NUM_THREADS": "1",
    "TRAINING_STALL_DUMP_S": "10",
}


class DockerfileError(ValueError):
    """A Dockerfile instruction the local cluster cannot reproduce."""


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        word, _, rest = current.partition(" ")
        out.append((word.upper(), rest.strip()))
        current = ""
    return out


_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _expand(value: str, env: dict[str, str]) -> str:
    """``${NAME}`` / ``$NAME`` from the ENV set so far (the base image's own values are not known: empty)."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


@dataclass(frozen=True)
class LocalImage:
    """Working directory, environment and copied paths of the image (the last build stage)."""

    workdir: str
    env: dict[str, str]
    copies: list[tuple[Path, str]] = field(default_factory=list)  # (source in the build context, target in image)

    @classmethod
    def from_dockerfile(cls, dockerfile: Path, context: Path) -> LocalImage:
        """Read the last stage of ``dockerfile`` whose build context is ``context``.

        A stage built ``FROM`` an earlier one (``FROM runtime``) starts with that stage's working directory,
        environment and copies, as Docker's does. ``COPY --from=<stage>`` brings files another stage built (an
        MPI, nccl-tests): not reproduced, the pod sees this machine's files at that path; any other flag
        (``--chown``, ...) is refused."""
        stages: dict[str, tuple[str, dict[str, str], list[tuple[Path, str]]]] = {}
        workdir, env, copies = "/", {}, []
        name: str | None = None
        for word, args in _instructions(dockerfile.read_text()):
            if word == "FROM":
                tokens = args.split()
                base = stages.get(tokens[0]) if tokens else None
                workdir, env, copies = (base[0], dict(base[1]), list(base[2])) if base else ("/", {}, [])
                name = tokens[2] if len(tokens) == 3 and tokens[1].upper() == "AS" else None
                if name is not None:
                    stages[name] = (workdir, env, copies)
                continue
            if word == "WORKDIR":
                workdir = posixpath.normpath(posixpath.join(workdir, args))
            elif word == "ENV":
                tokens = shlex.split(args)
                if tokens and "=" not in tokens[0]:  # legacy `ENV KEY value`
                    env[tokens[0]] = _expand(" ".join(tokens[1:]), env)
                for tok in tokens:
                    if "=" in tok:
                        key, _, value = tok.partition("=")
                        env[key] = _expand(value, env)
            elif word in ("COPY", "ADD"):
                tokens = shlex.split(args)
                flags = [t for t in tokens if t.startswith("--")]
                if any(f.startswith("--from=") for f in flags):
                    continue  # another stage's build output (the docstring)
                if flags:
                    raise DockerfileError(f"{word} {args}: flags (--chown, --chmod, ...) are not reproduced locally")
                *sources, dest = tokens
                for src in sources:
                    target = posixpath.join(workdir, dest)
                    if dest.endswith("/") and not src.endswith("/"):
                        target = posixpath.join(target, Path(src).name)
                    copies.append((context / src, posixpath.normpath(target)))
            if name is not None:
                stages[name] = (workdir, env, copies)
        return cls(workdir, env, copies)

    def mounts(self) -> list[Mount]:
        """The copied paths as read-only bind mounts."""
        out = []
        for src, target in self.copies:
            if not src.exists():
                raise DockerfileError(f"the image copies {src}, which does not exist")
            out.append(Mount(target, "bind", src, read_only=True))
        return out

    def container_env(self, venv_bin: Path | None = None) -> dict[str, str]:
        """The image's environment and :data:`LOCAL_ENV`, with ``PATH`` = this venv first, then the ``bin`` of each
        ``PYTHONPATH`` entry that has one, then the system's (the image's own ``PATH`` names where the image keeps
        its interpreter, which this machine does not have), and this interpreter's ``PYTHONPATH`` entries after the
        image's."""
        venv = venv_bin or Path(sys.executable).parent
        env = {k: v for k, v in self.env.items() if k != "PATH"}
        # Packages this interpreter finds through PYTHONPATH (wheels installed with pip --target) are part of what
        # stands in for the image's venv here: they follow the image's own PYTHONPATH.
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
        if extra:
            env["PYTHONPATH"] = os.pathsep.join([*filter(None, [env.get("PYTHONPATH")]), *extra])
        # Their console scripts (ft_launcher) are where pip --target puts them: <target>/bin.
        scripts = [str(Path(p) / "bin") for p in extra if (Path(p) / "bin").is_dir()]
        return {"HOME": "/root", **env, **LOCAL_ENV, "PATH": ":".join([str(venv), *scripts, SYSTEM_PATH])}
