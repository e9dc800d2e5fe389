"""Write the bytecode of what the suite and the training processes import, once, at setup.

``python -m scripts.warm_bytecode`` (``scripts/setup.sh``, after the install). Setup installs without compiling
bytecode (uv's default: compiling every installed file costs more than it saves), so on a fresh clone each module
is compiled by the first process that imports it, and by every other process that imports it before that one has
written its cache: three pytest workers collecting the same test files and aws-cdk-lib's jsii bindings (25 MB of
bytecode in 40 modules), the worker templates importing torch's. A fresh clone's suite took 344.7 s against
316.2 s for the same clone once its caches were written (2026-12-05).

``python -m scripts.warm_bytecode PART`` imports one part's modules (setup runs both parts at once, one per core):
``platform``, the platform's modules and the test tools', then compiles the project's own files; ``training``, what
the worker templates and the training processes import. Setup has bytecode written whatever the caller's
environment says. A module that fails to import fails setup, as the installed packages' import check did before.
"""

from __future__ import annotations

import compileall
import importlib
import pkgutil
import sys
import time
from pathlib import Path

from training.launch.prefork import WARM_MODULES

REPO = Path(__file__).resolve().parents[1]
#: Packages whose every module is imported (each imports the aws-cdk-lib or cdk8s-plus bindings it builds on).
WALKED = ("stacks", "charts", "platform_config")
#: What each part imports besides its walked packages.
PARTS: dict[str, tuple[str, ...]] = {
    "platform": ("cfnlint.api", "hypothesis", "xdist", "pytest"),
    "training": (*WARM_MODULES, "torch.distributed.checkpoint", "matplotlib.pyplot"),
}
#: The project's own files, compiled without being imported (not the tests: pytest writes bytecode of its own for a
#: test module, with its assertions rewritten).
OWN = ("app.py", "benchmarks", "charts", "image", "platform_config", "scripts", "stacks", "training")


def modules(part: str) -> list[str]:
    """Every module ``part`` imports, in order."""
    if part != "platform":
        return list(PARTS[part])
    walked = [
        info.name
        for package in WALKED
        for info in pkgutil.walk_packages([str(REPO / package)], prefix=f"{package}.")
        if not info.name.rsplit(".", 1)[-1].startswith("_")
    ]
    return [*WALKED, *walked, *PARTS[part]]


def compile_own() -> bool:
    """Compile :data:`OWN`; whether every file compiled."""
    results = [
        compileall.compile_file(path, quiet=2) if path.suffix == ".py" else compileall.compile_dir(path, quiet=2)
        for path in (REPO / p for p in OWN)
    ]
    return all(results)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in PARTS:
        print(f"usage: python -m scripts.warm_bytecode {{{','.join(PARTS)}}}", file=sys.stderr)
        return 2
    part, start = argv[0], time.perf_counter()
    names = modules(part)
    for name in names:
        importlib.import_module(name)
    ok = compile_own() if part == "platform" else True
    print(f"[setup]   bytecode ({part}): {len(names)} modules and their imports in {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
