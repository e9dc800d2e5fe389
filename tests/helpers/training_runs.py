"""Shared helpers for tests that start training processes (torchrun with a free port, bounded by a timeout)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_TRAINER = Path(__file__).with_name("run_trainer.py")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default range starts here


#: The ports :func:`free_port` picks from: below the kernel's ephemeral range. A port from that range (what binding to
#: port 0 gives) can be taken, before the run binds it, as the local port of any outgoing connection: seen once as a
#: run's in-process store port, whose host rank then fell back to a client of nothing and timed out after 20 s.
PORT_RANGE = (20000, _ephemeral_low() - 1)
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port from :data:`PORT_RANGE` that was free a moment ago (bound and released), and that this process
    has not handed out before (a run's two ports, or a concurrent run's, never coincide)."""
    import random

    for _ in range(200):
        port = random.randint(*PORT_RANGE)
        if port in _HANDED_OUT:
            continue
        _HANDED_OUT.add(port)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port in {PORT_RANGE} after 200 tries")


def child_env(**extra: str) -> dict[str, str]:
    """Environment for child processes: repo on PYTHONPATH, unbuffered, quiet CPU threads."""
    env = dict(os.environ)
    env.update(
        PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep),
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        TORCH_CPP_LOG_LEVEL="error",
    )
    env.update(extra)
    return env


#: Old name, kept for importers; not a test (pytest would collect a ``test_*`` function imported into a test module).
test_env = child_env
test_env.__test__ = False  # type: ignore[attr-defined]


def python_stdout(args: list[str], timeout_s: float) -> str:
    """Run ``python ARGS`` from the repository with :func:`child_env` and a TMPDIR of its own; its stdout (asserting
    exit 0)."""
    with tempfile.TemporaryDirectory(prefix="script-") as tmp:
        env = child_env(TMPDIR=tmp)
        proc = subprocess.run(
            [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def forked_stdout(module: str, args: list[str], timeout_s: float, **env_vars: str) -> str:
    """Run ``python -m MODULE ARGS`` forked from this test process's :func:`shared_template` (no imports of its own;
    it ends with ``os._exit``, so it must not need the interpreter's exit), with a TMPDIR of its own and
    ``env_vars`` added to its environment; its stdout (asserting exit 0 and no cold start).

    The TMPDIR, removed after it, takes what the processes it kills leave (NVRx writers' ``pymp-*`` directories);
    its path is short (in the machine's /tmp): AF_UNIX socket paths in it must fit 107 bytes."""
    from training.launch.prefork import SOCKET_ENV

    cmd = [sys.executable, "-m", "training.launch.prefork", "run", module, *args]
    with tempfile.TemporaryDirectory(prefix="forked-") as tmp:
        env = {**child_env(TMPDIR=tmp), **env_vars, SOCKET_ENV: shared_template()}
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[prefork] cold start" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def local_run(
    run_dir: Path,
    *,
    steps: int,
    faults: str = "",
    mode: str = "inprocess-ft",
    config: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 240,
    fresh: bool = True,
    nproc: int = 2,
    own_template: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``python -m training.local`` with ``config`` (default: a copy of :data:`FAST_CONFIG`) on fresh ports;
    ``fresh=False`` launches the same run again (the run directory is kept). Its launcher and workers are forked
    from this test process's :func:`shared_template`, unless ``own_template`` (one per launch, as ``make demo``).
    Without a ``train.data_dir`` the run reads :func:`generated_corpus` (what its rank 0 would generate)."""
    import copy

    from training.local import run_local

    config = copy.deepcopy(FAST_CONFIG if config is None else config)  # the caller's stays as it was
    train = config.setdefault("train", {})
    if not train.get("data_dir"):
        train["data_dir"] = str(generated_corpus(train.get("seed")))
    return run_local(
        run_dir,
        config=config,
        steps=steps,
        faults=faults,
        mode=mode,
        ports=(free_port(), free_port()),
        env=env or child_env(),
        timeout_s=timeout_s,
        fresh=fresh,
        nproc=nproc,
        template=None if own_template else shared_template(),
    )


_CORPORA: dict[int, Path] = {}
_CORPORA_LOCK = threading.Lock()


def generated_corpus(seed: int | None = None) -> Path:
    """The offline corpus a run of train seed ``seed`` (default: the schema's) generates on its rank 0 without a
    ``train.data_dir``, generated once per test process (0.18 CPU-s each on the 2-core machine, once per launch
    otherwise) into a directory removed when the process ends. Runs only read it."""
    import atexit
    import shutil

    from platform_config.schema import TrainConfig
    from training.data.dataset import ensure_generated_corpus
    from training.trainer import GENERATED_CORPUS_BYTES

    seed = TrainConfig().seed if seed is None else seed
    with _CORPORA_LOCK:
        if seed not in _CORPORA:
            root = Path(tempfile.mkdtemp(prefix="corpus-"))
            atexit.register(shutil.rmtree, root, True)
            _CORPORA[seed] = ensure_generated_corpus(root / f"seed{seed}", GENERATED_CORPUS_BYTES, seed=seed)
        return _CORPORA[seed]


_SHARED_TEMPLATE: list[subprocess.Popen] = []
_SHARED_TEMPLATE_LOCK = threading.Lock()
_SHARED_TEMPLATE_ENDED: list[int] = []  # the codes of shared templates that failed (SIGTERM: 0) before this process


#: ``PID:SOCKET`` of the suite's worker template, started by the xdist controller for its workers
#: (:mod:`tests.helpers.suite_template`); without it (a serial run) each test process starts its own.
SUITE_TEMPLATE_ENV = "TRAINING_TESTS_SUITE_TEMPLATE"


def shared_template() -> str:
    """The socket of the worker template (:mod:`training.launch.prefork`) the local and torchrun runs of this test
    process fork from: the suite's (:data:`SUITE_TEMPLATE_ENV`, one for all xdist workers) while it serves, else
    this process's own (:func:`own_template`). Either way the training code is imported once, not once per launch
    and worker (4-6 CPU-s each on the 2-core machines). The template forks each process with that process's own
    argv, environment and directory, and nothing in the training code reads the environment at import, so a run
    sees what its own template would give it; ``test_local.py`` and the cluster runs keep their own templates.
    A forked process ends with ``os._exit`` (no atexit, no finalizers at exit): what checks an interpreter's exit
    (``test_nvrx_async``'s scripts, through :func:`python_stdout`) keeps a fresh interpreter."""
    suite = os.environ.get(SUITE_TEMPLATE_ENV, "")
    pid, _, path = suite.partition(":")
    if path and _alive(int(pid)) and os.path.exists(path):
        return path
    return own_template()


def own_template() -> str:
    """This test process's own worker template, started on first use (from any thread: one template) and stopped
    at exit."""
    path = f"/tmp/training-prefork-tests-{os.getpid()}.sock"
    with _SHARED_TEMPLATE_LOCK:  # fixtures start runs from thread pools: one template, not one per thread
        if _SHARED_TEMPLATE and _SHARED_TEMPLATE[0].poll() is None:
            return path
        if _SHARED_TEMPLATE and _SHARED_TEMPLATE[0].returncode != 0:  # it failed: its log is kept at exit
            _SHARED_TEMPLATE_ENDED.append(_SHARED_TEMPLATE[0].returncode)
        if not _SHARED_TEMPLATE:
            import atexit

            atexit.register(_stop_own_template, path)
        _SHARED_TEMPLATE[:] = [start_template(path)]
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's: alive
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:  # reaped since the signal check
        return False


def start_template(path: str) -> subprocess.Popen:
    """``python -m training.launch.prefork serve`` at ``path`` (its log beside it); returns once it listens there (it
    binds before its imports: runs that connect earlier wait in its backlog)."""
    import time

    log = open(Path(path).with_suffix(".log"), "a")  # noqa: SIM115 (the template's, until it ends)
    env = child_env(PYTHONWARNINGS="ignore")  # as training.local gives its own template
    cmd = [sys.executable, "-m", "training.launch.prefork", "serve", "--socket", path]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead template's socket: wait for the new one's
    template = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=log)
    log.close()
    deadline = time.monotonic() + 30
    while not os.path.exists(path) and template.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return template


def stop_template(template: subprocess.Popen, path: str, *, keep_log: bool = False) -> None:
    """Stop ``template`` and remove its socket; its log is removed unless ``keep_log`` or it failed (kept for its
    post-mortem, as the tests that saw it fail say nothing of it)."""
    from training.local import stop_template as stop

    stop(template)  # a template that already ended is only reaped
    with contextlib.suppress(FileNotFoundError):  # left by a template stopped before its loop (during its imports)
        os.unlink(path)
    if not keep_log and template.returncode in (0, -15):
        Path(path).with_suffix(".log").unlink(missing_ok=True)


def _stop_own_template(path: str) -> None:
    crashed = bool(_SHARED_TEMPLATE_ENDED) or any(t.poll() not in (None, 0) for t in _SHARED_TEMPLATE)
    for template in _SHARED_TEMPLATE:
        stop_template(template, path, keep_log=crashed)


def cluster_run(
    run_dir: Path,
    *,
    nodes: int,
    steps: int,
    faults: str = "",
    mode: str = "inprocess-ft",
    nproc: int = 1,
    config: dict[str, Any] | None = None,
    node_replace_s: float = 1.0,
    timeout_s: float = 300,
    warm: bool = True,
    manifests: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m training.local --nodes`` (the training Job's manifests on a local cluster of ``nodes`` pods) with
    ``config`` (default: a copy of :data:`FAST_CONFIG`). Every pod has a network of its own: no ports to choose.
    ``warm``: each pod's worker template is forked into it from this test process's :func:`shared_template` (the
    pod's own imports, 4-6 CPU-s, are what a cluster pays; the tests check what follows them); else it imports.
    ``manifests``: the run's manifests, synthesized before (:func:`cluster_manifests` with the same arguments)."""
    import copy

    from training.local import run_local

    return run_local(
        run_dir,
        config=copy.deepcopy(FAST_CONFIG) if config is None else config,
        steps=steps,
        faults=faults,
        mode=mode,
        nproc=nproc,
        env=child_env(),
        timeout_s=timeout_s,
        nodes=nodes,
        node_replace_s=node_replace_s,
        template=shared_template() if warm else None,
        manifests=manifests,
    )


_SYNTH_LOCK = threading.Lock()


def cluster_manifests(
    out: Path,
    *,
    nodes: int,
    steps: int,
    faults: str = "",
    mode: str = "inprocess-ft",
    nproc: int = 1,
    config: dict[str, Any] | None = None,
) -> Path:
    """The manifests :func:`cluster_run` with these arguments synthesizes, synthesized in this process by
    ``training.local --synth-only`` (under ``out``): cdk8s's jsii kernel starts once per test process, not once per
    run (1.5-2 CPU-s each). The run checks that they were synthesized from its own config."""
    import copy
    import io

    from training.cluster.runner import STATE_DIR
    from training.local import launch, parse_args, run_args

    config = copy.deepcopy(FAST_CONFIG) if config is None else config
    argv = run_args(out, config=config, steps=steps, faults=faults, mode=mode, nproc=nproc, nodes=nodes)
    argv.append("--synth-only")
    said = io.StringIO()
    with _SYNTH_LOCK, contextlib.redirect_stdout(said):  # one jsii kernel per process: one synthesis at a time
        rc = launch(parse_args(argv))
    assert rc == 0, said.getvalue()
    return out / STATE_DIR / "manifests"


def torchrun(
    script_args: list[str],
    *,
    nproc: int = 2,
    timeout_s: float = 180,
    env: dict[str, str] | None = None,
    module: bool = False,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``torchrun --standalone``-style on free ports (its rendezvous, and the in-process store unless ``env``
    names one); ``script_args[0]`` is a script of this repository (or a module with ``module``). torchrun and the
    workers are forked from this test process's :func:`shared_template` (a worker's script runs as its module,
    ``tests.helpers.X``), as ``training.local`` and the pods start them.

    Raises ``subprocess.TimeoutExpired`` after ``timeout_s`` (torchrun and its workers are killed) and,
    with ``check``, ``AssertionError`` carrying the output on a non-zero exit.
    """
    target, *args = (str(a) for a in script_args)
    if not module:  # tests/helpers/x.py -> tests.helpers.x
        target = ".".join(Path(target).resolve().relative_to(REPO_ROOT).with_suffix("").parts)
    cmd = [
        sys.executable,
        *("-m", "training.launch.prefork", "run", "torch.distributed.run"),
        f"--nproc-per-node={nproc}",
        "--nnodes=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        "--max-restarts=0",
        *("-m", "training.launch.prefork", "run", target, *args),
    ]
    from training.launch.prefork import SOCKET_ENV
    from training.resilience.inprocess import STORE_PORT_ENV

    # A port of its own for the in-process layer's store too: on the config's fixed one, an in-process run of the
    # other test process joined this one's barrier (NVRx's BarrierOverflow, arrived_ranks=[0, 0, 1, 1]).
    # A TMPDIR of its own, removed after it, as a pod's /tmp: torchrun never removes its torchelastic_* directory.
    with tempfile.TemporaryDirectory(prefix="torchrun-") as tmp:
        env = {STORE_PORT_ENV: str(free_port()), **(env or child_env()), "TMPDIR": tmp, SOCKET_ENV: shared_template()}
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"torchrun exited {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"
        )
    return proc


def run_trainer(
    run_dir: Path,
    *,
    nproc: int = 2,
    steps: int = 10,
    mode: str = "sync",
    config: dict[str, Any] | None = None,
    extra_args: list[str] | None = None,
    timeout_s: float = 180,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``tests/helpers/run_trainer.py`` (Trainer without NVRx) under torchrun; returns (process, run_dir).

    ``config`` is a nested dict merged into the default ProjectConfig (e.g. ``{"checkpoint": {"interval_steps": 5}}``).
    The script writes ``result.json`` (rank 0) into ``run_dir``: final_step, losses, digest, restored_from.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    args = [RUN_TRAINER, "--run-dir", run_dir, "--steps", steps, "--mode", mode]
    if config:
        args += ["--config-json", json.dumps(config)]
    args += extra_args or []
    return torchrun(args, nproc=nproc, timeout_s=timeout_s, env=env, check=check), run_dir


def read_result(run_dir: Path) -> dict[str, Any]:
    """The ``result.json`` written by ``run_trainer.py``."""
    return json.loads((Path(run_dir) / "result.json").read_text())


#: Small, fast settings for CPU integration tests (tiny model, short sequences).
FAST_CONFIG: dict[str, Any] = {
    "model": {"size": "tiny"},
    "train": {"seq_len": 32, "micro_batch_size": 4, "warmup_steps": 2, "eval_interval": 0, "steps": 40},
    # A fixed memory interval: each run's rollbacks are then the same every time (the ``auto`` default follows the
    # measured costs; tests/unit/training/checkpoint/test_memory_interval.py covers it).
    "checkpoint": {"interval_steps": 5, "keep_last": 3, "memory_interval_steps": 5},
}


@contextlib.contextmanager
def single_process_group(timeout_s: float | None = None) -> Iterator[None]:
    """A real one-rank gloo process group in this process (file store in a temp dir); destroyed on exit.

    ``timeout_s``: the default group's timeout (None: torch's default)."""
    import datetime

    import torch.distributed as dist

    if dist.is_initialized():
        raise RuntimeError("a process group is already initialised in this process")
    timeout = {} if timeout_s is None else {"timeout": datetime.timedelta(seconds=timeout_s)}
    with tempfile.TemporaryDirectory() as tmp:
        store = dist.FileStore(os.path.join(tmp, "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1, **timeout)
        try:
            yield
        finally:
            dist.destroy_process_group()


def tiny_app_state(seed: int = 0, *, extra: dict[str, Any] | None = None):  # -> training.checkpoint.state.AppState
    """A tiny FSDP2 model + AdamW + sampler wrapped in an AppState (needs an initialised process group)."""
    import torch
    import torch.distributed as dist

    from training.checkpoint.state import AppState
    from training.data.dataset import ResumableSampler
    from training.model.llama import build_model
    from training.parallel.distributed import apply_fsdp

    torch.manual_seed(seed)
    model = apply_fsdp(build_model("tiny", 264, max_seq_len=16), torch.device("cpu"))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sampler = ResumableSampler(1000, 2, dist.get_rank(), dist.get_world_size(), seed=seed)
    return AppState(model, optim, sampler, rank=dist.get_rank(), extra=extra)


def tiny_train_step(state: Any) -> float:
    """One optimizer step on random tokens drawn from the sampler position (changes model + optimizer)."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(state.sampler.position)
    state.sampler.next_batch()
    x = torch.randint(0, 256, (2, 9), generator=g)
    logits = state.model(x[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
    loss.backward()
    state.optimizer.step()
    state.optimizer.zero_grad()
    state.step += 1
    return float(loss.detach())


def finished_write(root: Path, step: int):  # -> training.checkpoint.backends.InFlight
    """A complete, uncommitted ``step_N.tmp`` dir of the tiny state at ``step``, as a finished async write leaves it
    (needs an initialised process group); returns its in-flight record."""
    import time

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemWriter

    from training.checkpoint.backends import InFlight
    from training.checkpoint.files import TMP_SUFFIX, step_dir_name

    state = tiny_app_state(0)
    tiny_train_step(state)
    state.step = step
    tmp = Path(root) / (step_dir_name(step) + TMP_SUFFIX)
    dcp.save({"app": state.state_dict()}, storage_writer=FileSystemWriter(tmp))
    return InFlight(step, tmp, time.perf_counter())


def group_timeout_s(group: Any) -> float:
    """The timeout a gloo process group's collectives run with (torch's private options; tests only)."""
    import torch

    return group._get_backend(torch.device("cpu")).options._timeout.total_seconds()


def make_marker_unreadable(ckpt: Path) -> bytes:
    """Replace a checkpoint's commit marker by a directory of the same name, so that reading it fails with EISDIR:
    an OSError other than "file not found", as an I/O error on a network file system is. Returns its bytes."""
    from training.checkpoint.files import COMMIT_MARKER

    marker = Path(ckpt) / COMMIT_MARKER
    data = marker.read_bytes()
    marker.unlink()
    marker.mkdir()
    return data


def restore_marker(ckpt: Path, data: bytes) -> None:
    """Undo :func:`make_marker_unreadable`."""
    from training.checkpoint.files import COMMIT_MARKER

    marker = Path(ckpt) / COMMIT_MARKER
    marker.rmdir()
    marker.write_bytes(data)


def mount_tmpfs(path: Path, size: str, *, read_only: bool = False) -> bool:
    """Mount a real tmpfs of ``size`` at ``path`` (a file system that fills up, or refuses writes); False where
    mounting is not allowed (not root). Unmount with :func:`unmount`."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    return os.geteuid() == 0 and not subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)]).returncode


def unmount(path: Path) -> None:
    subprocess.run(["umount", str(path)], check=False)


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "512k", *, read_only: bool = False) -> Iterator[Path]:
    """:func:`mount_tmpfs` for the duration of a ``with`` block; skips the test where mounting is not allowed."""
    import pytest

    path = Path(path)
    if not mount_tmpfs(path, size, read_only=read_only):
        pytest.skip("needs root to mount a tmpfs")
    try:
        yield path
    finally:
        unmount(path)
