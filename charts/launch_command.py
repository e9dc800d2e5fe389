"""The training container's command line: ``ft_launcher`` or ``torchrun`` under a small bash supervisor.

Generated here as argument lists so tests can check every flag. The container runs
``bash -c <supervisor_script(...)>``; the supervisor (PID 1)

* derives the node's identity from ``JOB_COMPLETION_INDEX`` (index 0 hosts the rendezvous store) and ``JOB_ATTEMPT``
  from the index's failure counts, counted and ignored;
* starts the launcher, which starts one worker per GPU through :func:`worker_script`; each worker's exit code goes to
  a node-local exit log;
* turns a worker's "fail the Job" exit (``fail_job_exit_codes``) into the pod's exit code at once, even though
  torchrun/ft_launcher themselves only ever exit 0 or 1, so ``podFailurePolicy`` can fail the Job;
* otherwise, when the launcher exits, asks ``python -m training.resilience.supervisor decide`` whether to end the pod
  (a fault of its own: Kubernetes replaces it) or to relaunch in place (a lost peer: rejoin the rendezvous once the
  peer's replacement is there), within the windowed budget ``job.relaunch``; on SIGTERM it stops the launcher and
  never relaunches.

Rendezvous: every launcher uses ``c10d`` at ``<job>-0.<service>:<job.rendezvous_port>``, hosted by completion index
0 (``--rdzv-conf is_host=...``), with round-scoped state: a replacement node joins the next round, and a launcher
whose workers are healthy restarts them to let it in (a membership change). Its timeouts come from
``job.rendezvous``. ft_launcher (NVRx 0.7 supports only ``c10d`` with its barrier rendezvous) also gets
``GROUP_RANK=$JOB_COMPLETION_INDEX``, the "infrastructure rank" that orders node ranks. torchrun gets
``--max-restarts 0`` (no in-job restarts in its modes). Workers get a store of their own per generation, hosted by
global rank 0 (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` in the pod spec), never the rendezvous's long-lived store.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, fields
from pathlib import Path

from charts.names import CONFIG_PATH, job_name, rendezvous_host, run_dir
from charts.topology import Topology
from platform_config import MODE_LAYERS, ProjectConfig, RecoveryMode
from training.launch.prefork import LAUNCHER_MODULES
from training.resilience.exit_codes import fail_job_exit_codes
from training.resilience.sigterm import DRAIN_FILE_ENV

TRAINING_MODULE = "training.train"
#: A process forked from the pod's worker template (``job.prefork_workers``): ``PREFORK_RUN MODULE ARGS...``.
PREFORK_RUN = ("python", "-m", "training.launch.prefork", "run")


@dataclass(frozen=True)
class NodeFiles:
    """Node-local files of the supervisor (the container's own /tmp; tests point them elsewhere)."""

    marker: str = "/tmp/training-unrecoverable"  # a worker's "fail the Job" exit code
    exit_log: str = "/tmp/training-exits"  # every worker exit of the current launch
    relaunch_log: str = "/tmp/training-relaunches"  # when the supervisor relaunched (the windowed budget)
    prefork_socket: str = "/tmp/training-prefork.sock"  # the worker template's socket (``job.prefork_workers``)
    #: Written when the pod itself is being stopped (its SIGTERM: a drain, an eviction): the workers then make a final
    #: save (training.resilience.sigterm); a SIGTERM their launcher sends to restart its group finds none.
    drain: str = "/tmp/training-drain"

    @classmethod
    def under(cls, root: Path) -> NodeFiles:
        """The same files, each under ``root`` by its own name (tests run the pod's scripts outside a pod)."""
        return cls(**{f.name: str(root / Path(f.default).name) for f in fields(cls)})


NODE_FILES = NodeFiles()
#: Shell variables the supervisor defines before the launcher line.
NODE_INDEX = "${JOB_COMPLETION_INDEX}"
IS_HOST = "${RDZV_IS_HOST}"
#: Seconds the supervisor gives a launcher to stop after SIGTERM (ft_launcher and torchrun give their workers 30 s).
STOP_GRACE_S = 45
#: ... and after its rendezvous host was replaced: the launcher is then blocked on the dead host in a C++ store call
#: that does not see SIGTERM (seen ignoring it for the whole grace on the local cluster), so a short one.
HOST_MOVED_GRACE_S = 1
#: First NVRx release whose ft_launcher has ``--ft-no-restart-exit-code`` (and ``--ft-gpu-memory-poll-interval``, as
#: far as this project has checked: docs/reference/ft_launcher-0.7.0-help.txt).
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


def rendezvous_conf(cfg: ProjectConfig) -> str:
    """``--rdzv-conf``: the host flag and ``job.rendezvous``'s timeouts (keys of torch's and NVRx's c10d handlers)."""
    r = cfg.job.rendezvous
    return ",".join(
        [
            f"is_host={IS_HOST}",
            f"join_timeout={_seconds(r.join_timeout_s)}",
            f"read_timeout={_seconds(r.read_timeout_s)}",
            f"last_call_timeout={_seconds(r.last_call_timeout_s)}",
            f"close_timeout={_seconds(r.close_timeout_s)}",
        ]
    )


def launcher_args(cfg: ProjectConfig, mode: RecoveryMode, topology: Topology, *, host: str | None = None) -> list[str]:
    """The launcher and its flags, up to (not including) the worker command."""
    host = host or rendezvous_host(cfg, mode)
    rendezvous = [
        "--nnodes",
        str(topology.nodes),
        "--nproc-per-node",
        str(topology.nproc_per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"{host}:{cfg.job.rendezvous_port}",
        "--rdzv-id",
        job_name(cfg, mode),
        "--rdzv-conf",
        rendezvous_conf(cfg),
    ]
    if not MODE_LAYERS[mode].ft_launcher:
        return ["torchrun", *rendezvous, "--max-restarts", "0"]
    ft = cfg.ft
    args = [
        "ft_launcher",
        *rendezvous,
        "--max-restarts",
        str(ft.max_restarts),
        "--monitor-interval",
        _seconds(ft.monitor_interval_s),
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
        # Which code NVRx's own "do not restart" verdict would exit with: our unrecoverable code. Inert as configured:
        # that verdict comes from NVRx's progress tracker, which is active only with --ft-checkpoint-iteration-file
        # (not passed), so today the flag only keeps the code consistent should the tracker be switched on.
        args += ["--ft-no-restart-exit-code", str(ft.unrecoverable_exit_code)]
        # The GPU-memory wait between a failed worker group and the next rendezvous (new in the same release).
        args += ["--ft-gpu-memory-poll-interval", _seconds(ft.gpu_memory_poll_interval_s)]
    return args


def worker_script(cfg: ProjectConfig, *, module: str = TRAINING_MODULE, files: NodeFiles = NODE_FILES) -> str:
    """What each worker runs (``bash -c``): the training, then a line in the node-local exit log (time, launcher
    restart count, local rank, exit code). On a "fail the Job" exit code it also writes the code to the marker file
    for the supervisor and stops the launcher (its parent) at once, so that the launcher cannot restart the worker
    group while the supervisor polls for the marker. A SIGTERM from the launcher (which signals the whole process
    group) reaches the training process; the wrapper waits for it, so a stopped worker is logged too (143)."""
    codes = "|".join(str(c) for c in fail_job_exit_codes(cfg.ft.unrecoverable_exit_code))
    python = f"{' '.join(PREFORK_RUN)} {module}" if cfg.job.prefork_workers else f"python -m {module}"
    return (
        "trap : TERM INT\n"
        f'{python} "$@"\nrc=$?\n'
        f'printf "%s %s %s %s\\n" "$(date +%s.%N)" "${{TORCHELASTIC_RESTART_COUNT:-0}}" "${{LOCAL_RANK:-0}}" "$rc"'
        f" >> {shlex.quote(files.exit_log)}\n"
        f'case "$rc" in {codes}) echo "$rc" > {shlex.quote(files.marker)}; kill -TERM "$PPID" 2>/dev/null;; esac\n'
        'exit "$rc"\n'
    )


def launch_argv(
    cfg: ProjectConfig,
    mode: RecoveryMode,
    topology: Topology,
    *,
    host: str | None = None,
    module: str = TRAINING_MODULE,
    files: NodeFiles = NODE_FILES,
    config_path: str = CONFIG_PATH,
) -> list[str]:
    """Full launcher command: launcher flags, then ``--no-python bash -c <worker> trainer <training args>``."""
    worker = ["--no-python", "bash", "-c", worker_script(cfg, module=module, files=files), "trainer"]
    return [*launcher_args(cfg, mode, topology, host=host), *worker, *training_args(cfg, mode, config_path)]


def supervised_launch(cfg: ProjectConfig, argv: list[str]) -> list[str]:
    """How the supervisor starts the launcher of :func:`launch_argv`: with the worker template
    (``job.prefork_workers``) forked from it like the workers, so that a relaunch pays no torch import (2-3 CPU-s
    per launcher on CPU; only the template's own start pays it), else run as ``python -m`` its module."""
    if cfg.job.prefork_workers:
        return [*PREFORK_RUN, LAUNCHER_MODULES[argv[0]], *argv[1:]]
    return ["python", "-m", LAUNCHER_MODULES[argv[0]], *argv[1:]]


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
    files: NodeFiles = NODE_FILES,
    config_path: str = CONFIG_PATH,
) -> str:
    """The container's ``bash -c`` script: PID 1, it runs the launcher, forwards SIGTERM to it, and after it exits
    either ends the pod or relaunches it in place (module docstring)."""
    host = host or rendezvous_host(cfg, mode)
    argv = launch_argv(cfg, mode, topology, host=host, module=module, files=files, config_path=config_path)
    launch = supervised_launch(cfg, argv)
    marker, exits, history = (shlex.quote(f) for f in (files.marker, files.exit_log, files.relaunch_log))
    budget = cfg.job.relaunch
    decide = [
        "python",
        "-m",
        "training.resilience.supervisor",
        "decide",
        *("--exits", files.exit_log, "--history", files.relaunch_log, "--rc", "${LAUNCHER_RC}"),
        *(["--host-moved", "${HOST_MOVED}"]),
        *("--launch-s", "${LAUNCH_S}", "--waiting-since", "${PEER_WAIT_SINCE}"),
        *("--join-timeout-s", _seconds(cfg.job.rendezvous.join_timeout_s)),
        *("--deadline-s", _seconds(cfg.job.lost_peer_deadline_s)),
        *("--unrecoverable", str(cfg.ft.unrecoverable_exit_code)),
        *("--max-in-window", str(budget.max_in_window), "--window-s", _seconds(budget.window_s)),
        *("--nproc", str(topology.nproc_per_node)),
        *(["--in-job"] if MODE_LAYERS[mode].ft_launcher else []),
    ]
    deadline = int(cfg.job.lost_peer_deadline_s)
    # The worker template (job.prefork_workers): started before each launch if not running, spared by the reaping.
    template: list[str] = []
    start_template: list[str] = []
    reap = ["  if [ $$ = 1 ]; then kill -KILL -1 2>/dev/null; fi"]
    if cfg.job.prefork_workers:
        sock = shlex.quote(files.prefork_socket)
        template = [
            f"export TRAINING_PREFORK_SOCKET={sock}",
            "prefork=",
            """trap '[ -n "$prefork" ] && kill -KILL "$prefork" 2>/dev/null' EXIT  # not only as PID 1 (tests)""",
            "start_prefork() {  # the worker template (training.launch.prefork): the training code imported once",
            '  if [ -z "$prefork" ] || ! kill -0 "$prefork" 2>/dev/null; then',
            f"    python -m training.launch.prefork serve --socket {sock} &",
            "    prefork=$!",
            "  fi",
            "}",
        ]
        start_template = ["  start_prefork  # before the rendezvous wait: its imports overlap it"]
        reap = [
            "  # ... except the worker template, pristine (it only forks), so a relaunch pays no imports",
            "  if [ $$ = 1 ]; then",
            '    for p in /proc/[0-9]*; do p=${p#/proc/}; [ "$p" = 1 ] || [ "$p" = "$prefork" ] || '
            "kill -KILL $p 2>/dev/null; done",
            "  fi",
        ]
    return "\n".join(
        [
            "set -u",
            'export GROUP_RANK="${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX is not set (not an Indexed Job pod)}"',
            'if [ "$GROUP_RANK" = 0 ]; then RDZV_IS_HOST=true; else RDZV_IS_HOST=false; fi',
            "# Earlier pods of this index, counted by the Job controller or ignored (a lost node, an eviction).",
            "export JOB_ATTEMPT=$(( ${JOB_INDEX_FAILURES:-0} + ${JOB_INDEX_IGNORED_FAILURES:-0} ))",
            "export POD_RELAUNCH=0",
            "PEER_WAIT_SINCE=",
            f"rm -f {history}",
            f"mkdir -p {shlex.quote(run_dir(cfg, mode))}",
            "terminating=0",
            "launcher=",
            f"export {DRAIN_FILE_ENV}={shlex.quote(files.drain)}",
            f"rm -f {shlex.quote(files.drain)}",
            f"trap ': > {files.drain}; terminating=1; "
            """[ -n "$launcher" ] && kill -TERM "$launcher" 2>/dev/null' TERM INT""",
            "stop_launcher() {  # SIGTERM; SIGKILL after $1 s",
            '  kill -TERM "$launcher" 2>/dev/null',
            '  for _ in $(seq 1 "$1"); do kill -0 "$launcher" 2>/dev/null || return 0; sleep 1; done',
            '  echo "[supervisor] the launcher ignored SIGTERM for $1 s: SIGKILL"',
            '  kill -KILL "$launcher" 2>/dev/null',
            "}",
            "reap_leftovers() {  # as PID 1 of the pod: what a launch left (double-forked daemons) must not outlive it",
            *reap,
            "}",
            *template,
            "while :; do",
            # A SIGTERM between launches (the relaunch pause, the launch event) found no launcher to stop: the pod
            # is being deleted (a failed Job, an eviction), so it must not start another, which would sit in its
            # rendezvous until the SIGKILL at the end of the grace period.
            '  if [ "$terminating" = 1 ]; then echo "[supervisor] terminated before launch $POD_RELAUNCH"; exit 143',
            "  fi",
            f"  rm -f {marker} {exits}",
            *start_template,
            '  if [ "$RDZV_IS_HOST" = false ]; then',
            "    # The rendezvous host (index 0) may be starting or being replaced: wait for it, within the",
            f"    # job.lost_peer_deadline_s ({deadline} s) counted from the first launch that found no peers.",
            f"    until timeout 2 bash -c {shlex.quote(f'exec 3<>/dev/tcp/{host}/{cfg.job.rendezvous_port}')}"
            " 2>/dev/null; do",
            '      if [ "$terminating" = 1 ]; then exit 143; fi',
            '      : "${PEER_WAIT_SINCE:=$(date +%s)}"',
            f"      if [ $(( $(date +%s) - PEER_WAIT_SINCE )) -ge {deadline} ]; then",
            f'        echo "[supervisor] the rendezvous host {host} did not come back within job.lost_peer_deadline_s'
            f' = {deadline} s"',
            f"        exit {cfg.ft.unrecoverable_exit_code}",
            "      fi",
            "      sleep 1 & wait $!",
            "    done",
            "  fi",
            f'  echo "[supervisor] node {NODE_INDEX} of {topology.nodes}, attempt $JOB_ATTEMPT, launch $POD_RELAUNCH: '
            f'{argv[0]} ({mode.value})"',
            # The run's wall clock starts here (goodput counts pod start-up); not fatal if the log is not writable.
            "  "
            + shell_join(launch_event_argv(cfg, mode, topology, argv[0]))
            + ' || echo "[supervisor] warning: could not record the launch event"',
            "  export POD_LAUNCH_NS=$(date +%s%N)  # workers tell a first start of this launch from a restart",
            f"  host_ip=$(getent hosts {host} | head -n 1 | cut -d' ' -f1)",
            "  HOST_MOVED=0",
            "  launch_started=$(date +%s)",
            f"  {shell_join(launch)} &",
            "  launcher=$!",
            '  if [ "$terminating" = 1 ]; then kill -TERM "$launcher" 2>/dev/null; fi  # the trap ran before it began',
            '  while kill -0 "$launcher" 2>/dev/null; do',
            f"    if [ -e {marker} ]; then",
            f'      echo "[supervisor] a worker exited $(cat {marker}) (fail the Job): stopping the launcher"',
            f"      stop_launcher {STOP_GRACE_S}",
            "      break",
            "    fi",
            # A replaced rendezvous host has a new address; a launcher still talking to the old one would wait for
            # a dead peer until its TCP connection times out (minutes): relaunch it instead.
            f"    now_ip=$(getent hosts {host} | head -n 1 | cut -d' ' -f1)",
            '    if [ "$RDZV_IS_HOST" = false ] && [ -n "$now_ip" ] && [ "$now_ip" != "$host_ip" ]; then',
            f'      echo "[supervisor] the rendezvous host {host} moved ($host_ip -> $now_ip): stopping the launcher"',
            # Its launcher is blocked on the dead host (a C++ store call does not see SIGTERM): a short grace.
            f"      HOST_MOVED=1; stop_launcher {HOST_MOVED_GRACE_S}",
            "      break",
            "    fi",
            "    sleep 1 & wait $!  # a SIGTERM interrupts the wait at once (a trap waits for a foreground sleep)",
            "  done",
            "  while :; do",
            '    wait "$launcher"',
            "    rc=$?",
            '    kill -0 "$launcher" 2>/dev/null || break',
            "  done",
            "  launcher=",
            "  LAUNCHER_RC=$rc",
            "  LAUNCH_S=$(( $(date +%s) - launch_started ))",
            "  # A lost peer's wait: from the first launch whose workers never ran; over once a launch ran workers.",
            f'  if [ -s {exits} ]; then PEER_WAIT_SINCE=; else : "${{PEER_WAIT_SINCE:=$launch_started}}"; fi',
            f'  if [ -e {marker} ]; then exit "$(cat {marker})"; fi',
            '  if [ "$terminating" = 1 ]; then echo "[supervisor] terminated: launcher exited $rc"; exit "$rc"; fi',
            f'  decision=$({shell_join(decide)}) || decision="exit $rc the supervisor\'s decision failed"',
            '  echo "[supervisor] launcher exited $rc: $decision"',
            '  case "$decision" in',
            # A background sleep, so that a SIGTERM ends the pause at once (a trap waits for a foreground command).
            "    relaunch*) reap_leftovers; POD_RELAUNCH=$((POD_RELAUNCH + 1)); "
            f"sleep {_seconds(budget.delay_s)} & wait $! ;;",
            '    *) set -- $decision; exit "$2" ;;',
            "  esac",
            "done",
            "",
        ]
    )
