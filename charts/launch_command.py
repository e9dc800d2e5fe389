"""The training container's command line: ``ft_launcher`` or ``torchrun`` under a small bash supervisor.

Generated here as argument lists so tests can check every flag. The container runs
``bash -c <supervisor_script(...)>``; the supervisor

* derives the node's identity from ``JOB_COMPLETION_INDEX`` (index 0 hosts the rendezvous store),
* starts the launcher, which starts one worker per GPU through :func:`worker_script`,
* turns a worker's "unrecoverable" exit (``ft.unrecoverable_exit_code``) into the pod's exit code at once,
  even though torchrun/ft_launcher themselves only ever exit 0 or 1, so ``podFailurePolicy`` can fail the Job.

Rendezvous per launcher (verified against torch 2.13 and NVRx 0.4.1 / 0.7.0 sources):

* ``ft_launcher`` (NVRx 0.7 supports only ``c10d`` with its barrier rendezvous): endpoint ``<job>-0.<service>``,
  ``is_host`` true only on index 0, and ``GROUP_RANK=$JOB_COMPLETION_INDEX`` which NVRx uses as the
  "infrastructure rank" that orders node ranks. (``--node-rank`` is ignored by c10d, so it is not passed.)
* ``torchrun``: ``static`` rendezvous with ``--node-rank $JOB_COMPLETION_INDEX`` and rank 0 as master, so the
  node rank is exactly the completion index (no in-job restarts in these modes: ``--max-restarts 0``).
"""

from __future__ import annotations

import re
import shlex

from charts.names import CONFIG_PATH, job_name, rendezvous_host, run_dir
from charts.topology import Topology
from platform_config import MODE_LAYERS, ProjectConfig, RecoveryMode
from training.resilience.exit_codes import fail_job_exit_codes

TRAINING_MODULE = "training.train"
#: Node-local file a worker creates when it exits with the unrecoverable code; the supervisor watches it.
UNRECOVERABLE_MARKER = "/tmp/training-unrecoverable"
#: Shell variables the supervisor defines before the launcher line.
NODE_INDEX = "${JOB_COMPLETION_INDEX}"
IS_HOST = "${RDZV_IS_HOST}"
#: First NVRx release whose ft_launcher has ``--ft-no-restart-exit-code``.
_NO_RESTART_FLAG_SINCE = (0, 7, 0)
_SHELL_REF = re.compile(r"\$\{[A-Z_][A-Z0-9_]*\}")


def training_args(cfg: ProjectConfig, mode: RecoveryMode, config_path: str = CONFIG_PATH) -> list[str]:
    """Arguments of ``python -m training.train``; the fault schedule comes from ``faults.schedule``."""
    args = ["--config", config_path, "--run-dir", run_dir(cfg, mode), "--mode", mode.value]
    if cfg.faults.schedule.strip():
        args += ["--faults", cfg.faults.schedule.replace(" ", "")]
    return args


def _seconds(value: float) -> str:
    return f"{value:g}"


def section_timeouts_arg(sections: dict[str, float]) -> str:
    """``--ft-rank-section-timeouts`` value: ``name:seconds,...`` (NVRx ``_parse_section_timeouts_arg``)."""
    return ",".join(f"{name}:{_seconds(t)}" for name, t in sorted(sections.items()))


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


def launcher_args(cfg: ProjectConfig, mode: RecoveryMode, topology: Topology, *, host: str | None = None) -> list[str]:
    """The launcher and its flags, up to (not including) the worker command."""
    host = host or rendezvous_host(cfg, mode)
    common = ["--nnodes", str(topology.nodes), "--nproc-per-node", str(topology.nproc_per_node)]
    if not MODE_LAYERS[mode].ft_launcher:
        return [
            "torchrun",
            *common,
            "--rdzv-backend",
            "static",
            "--node-rank",
            NODE_INDEX,
            "--master-addr",
            host,
            "--master-port",
            str(cfg.job.rendezvous_port),
            "--max-restarts",
            "0",
        ]
    ft = cfg.ft
    args = [
        "ft_launcher",
        *common,
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"{host}:{cfg.job.rendezvous_port}",
        "--rdzv-id",
        job_name(cfg, mode),
        "--rdzv-conf",
        f"is_host={IS_HOST}",
        "--max-restarts",
        str(ft.max_restarts),
        "--ft-initial-rank-heartbeat-timeout",
        _seconds(ft.initial_rank_heartbeat_timeout_s),
        "--ft-rank-heartbeat-timeout",
        _seconds(ft.rank_heartbeat_timeout_s),
        "--ft-rank-section-timeouts",
        section_timeouts_arg(ft.section_timeouts_s),
        "--ft-rank-out-of-section-timeout",
        _seconds(ft.rank_out_of_section_timeout_s),
    ]
    if _version(cfg.image.nvrx_version) >= _NO_RESTART_FLAG_SINCE:
        # NVRx's own "do not restart" verdicts (no progress across restarts) exit with our unrecoverable code.
        args += ["--ft-no-restart-exit-code", str(ft.unrecoverable_exit_code)]
    return args


def worker_script(cfg: ProjectConfig, *, module: str = TRAINING_MODULE, marker: str = UNRECOVERABLE_MARKER) -> str:
    """What each worker runs (``bash -c``): the training; on a "fail the Job" exit code it writes the code to
    the marker file for the supervisor, then stops the launcher (its parent) at once, so that the launcher cannot
    restart the worker group while the supervisor polls for the marker."""
    codes = "|".join(str(c) for c in fail_job_exit_codes(cfg.ft.unrecoverable_exit_code))
    return (
        f'python -m {module} "$@"\nrc=$?\n'
        f'case "$rc" in {codes}) echo "$rc" > {shlex.quote(marker)}; kill -TERM "$PPID" 2>/dev/null;; esac\n'
        'exit "$rc"\n'
    )


def launch_argv(
    cfg: ProjectConfig,
    mode: RecoveryMode,
    topology: Topology,
    *,
    host: str | None = None,
    module: str = TRAINING_MODULE,
    marker: str = UNRECOVERABLE_MARKER,
    config_path: str = CONFIG_PATH,
) -> list[str]:
    """Full launcher command: launcher flags, then ``--no-python bash -c <worker> trainer <training args>``."""
    worker = ["--no-python", "bash", "-c", worker_script(cfg, module=module, marker=marker), "trainer"]
    return [*launcher_args(cfg, mode, topology, host=host), *worker, *training_args(cfg, mode, config_path)]


def shell_join(argv: list[str]) -> str:
    """Quote ``argv`` for bash; tokens holding ``${VAR}`` references are double-quoted so they expand."""
    out = []
    for token in argv:
        if _SHELL_REF.search(token):
            if re.search(r'["\\`]|\$(?!\{)', token):
                raise ValueError(f"cannot double-quote {token!r}")
            out.append(f'"{token}"')
        else:
            out.append(shlex.quote(token))
    return " ".join(out)


def launch_event_argv(cfg: ProjectConfig, mode: RecoveryMode, topology: Topology, launcher: str) -> list[str]:
    """``python -m training.telemetry.events launch ...``: the ``launch`` event that starts the run's wall clock."""
    return [
        "python",
        "-m",
        "training.telemetry.events",
        "launch",
        "--run-dir",
        run_dir(cfg, mode),
        "--launcher",
        launcher,
        "--nproc",
        str(topology.nproc_per_node),
        "--mode",
        mode.value,
    ]


def supervisor_script(
    cfg: ProjectConfig,
    mode: RecoveryMode,
    topology: Topology,
    *,
    host: str | None = None,
    module: str = TRAINING_MODULE,
    marker: str = UNRECOVERABLE_MARKER,
    config_path: str = CONFIG_PATH,
) -> str:
    """The container's ``bash -c`` script (bash is PID 1: it forwards SIGTERM to the launcher)."""
    argv = launch_argv(cfg, mode, topology, host=host, module=module, marker=marker, config_path=config_path)
    q_marker = shlex.quote(marker)
    return "\n".join(
        [
            "set -u",
            f"rm -f {q_marker}",
            'export GROUP_RANK="${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX is not set (not an Indexed Job pod)}"',
            'if [ "$GROUP_RANK" = 0 ]; then RDZV_IS_HOST=true; else RDZV_IS_HOST=false; fi',
            f"mkdir -p {shlex.quote(run_dir(cfg, mode))}",
            f'echo "[supervisor] node {NODE_INDEX} of {topology.nodes}: {argv[0]} ({mode.value})"',
            # The run's wall clock starts here (goodput counts pod start-up); not fatal if the log is not writable.
            shell_join(launch_event_argv(cfg, mode, topology, argv[0]))
            + ' || echo "[supervisor] warning: could not record the launch event"',
            f"{shell_join(argv)} &",
            "launcher=$!",
            """trap 'kill -TERM "$launcher" 2>/dev/null' TERM INT""",
            'while kill -0 "$launcher" 2>/dev/null; do',
            f"  if [ -e {q_marker} ]; then",
            f'    echo "[supervisor] a worker exited $(cat {q_marker}) (fail the Job): stopping the launcher"',
            '    kill -TERM "$launcher" 2>/dev/null',
            "    break",
            "  fi",
            "  sleep 1",
            "done",
            "while :; do",
            '  wait "$launcher"',
            "  rc=$?",
            '  kill -0 "$launcher" 2>/dev/null || break',
            "done",
            f'if [ -e {q_marker} ]; then exit "$(cat {q_marker})"; fi',
            'exit "$rc"',
            "",
        ]
    )
