"""The launcher command lines, parsed by the real torchrun and ft_launcher argument parsers."""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nvidia_resiliency_ext.fault_tolerance.config import FaultToleranceConfig
from nvidia_resiliency_ext.fault_tolerance.launcher import get_args_parser as ft_parser
from torch.distributed.run import get_args_parser as torchrun_parser

from charts import launch_command as lc
from charts.names import CONFIG_PATH, rendezvous_host, run_dir
from charts.topology import Topology
from platform_config import MODE_LAYERS, RecoveryMode
from tests.unit.charts.conftest import make_cfg

FT_MODES = [m for m in RecoveryMode if MODE_LAYERS[m].ft_launcher]
TORCHRUN_MODES = [m for m in RecoveryMode if not MODE_LAYERS[m].ft_launcher]
INSTALLED_NVRX = "0.4.1"  # requirements.txt; the image carries image.nvrx_version (0.7.0)


def _expand(argv: list[str], index: int = 0) -> list[str]:
    """What bash hands the launcher on node ``index``."""
    subs = {lc.NODE_INDEX: str(index), lc.IS_HOST: "true" if index == 0 else "false"}
    out = []
    for token in argv:
        for ref, value in subs.items():
            token = token.replace(ref, value)
        out.append(token)
    return out


def test_launcher_per_mode(cfg):
    topo = Topology.from_config(cfg)
    for mode in RecoveryMode:
        assert lc.launch_argv(cfg, mode, topo)[0] == ("ft_launcher" if MODE_LAYERS[mode].ft_launcher else "torchrun")


@pytest.mark.parametrize("mode", FT_MODES)
def test_ft_launcher_flags_parse_and_carry_the_config(mode):
    cfg = make_cfg(image={"nvrx_version": INSTALLED_NVRX}, faults={"schedule": "exception@40:1, sigkill@90"})
    topo = Topology.from_config(cfg)
    argv = _expand(lc.launch_argv(cfg, mode, topo), index=1)
    args = ft_parser().parse_args(argv[1:])
    assert args.nnodes == str(topo.nodes) and args.nproc_per_node == str(topo.nproc_per_node)
    assert args.rdzv_backend == "c10d"
    assert args.rdzv_endpoint == f"{rendezvous_host(cfg, mode)}:{cfg.job.rendezvous_port}"
    assert args.rdzv_conf == ("is_host=false,join_timeout=600,read_timeout=60,last_call_timeout=1,close_timeout=30")
    assert float(args.monitor_interval) == cfg.ft.monitor_interval_s == 0.5
    assert args.max_restarts == cfg.ft.max_restarts
    assert args.no_python and args.training_script == "bash"
    ft = FaultToleranceConfig.from_args(args)
    assert ft.initial_rank_heartbeat_timeout == cfg.ft.initial_rank_heartbeat_timeout_s
    assert ft.rank_heartbeat_timeout == cfg.ft.rank_heartbeat_timeout_s
    assert dict(ft.rank_section_timeouts) == cfg.ft.section_timeouts_s
    assert ft.rank_out_of_section_timeout == cfg.ft.rank_out_of_section_timeout_s
    script_args = args.training_script_args
    assert script_args[0] == "-c" and script_args[2] == "trainer"
    assert script_args[3:] == lc.training_args(cfg, mode)
    assert script_args[3:] == [
        *("--config", CONFIG_PATH, "--run-dir", run_dir(cfg, mode), "--mode", mode.value),
        *("--faults", "exception@40:1,sigkill@90"),
    ]


@pytest.mark.parametrize("mode", TORCHRUN_MODES)
def test_torchrun_uses_the_c10d_rendezvous_hosted_by_index_0(mode):
    """Round-scoped rendezvous state: a replacement node joins a new round instead of a dead one's keys."""
    cfg = make_cfg(job={"rendezvous": {"join_timeout_s": 900, "read_timeout_s": 20}})
    topo = Topology.from_config(cfg)
    for index, host in ((0, "true"), (3, "false")):
        args = torchrun_parser().parse_args(_expand(lc.launch_argv(cfg, mode, topo), index=index)[1:])
        assert (args.rdzv_backend, args.max_restarts, args.rdzv_id) == ("c10d", 0, f"fsdp-train-{mode.value}")
        assert args.rdzv_endpoint == f"{rendezvous_host(cfg, mode)}:{cfg.job.rendezvous_port}"
        conf = dict(kv.split("=") for kv in args.rdzv_conf.split(","))
        assert conf == {
            "is_host": host,
            "join_timeout": "900",
            "read_timeout": "20",
            "last_call_timeout": "1",
            "close_timeout": "30",
        }
    assert args.nnodes == str(topo.nodes) and args.nproc_per_node == str(topo.nproc_per_node)
    assert args.training_script_args[3:] == lc.training_args(cfg, mode)
    assert "--faults" not in args.training_script_args  # empty schedule -> no flag


def test_nvrx_07_flags_and_no_removed_flags(cfg):
    assert cfg.image.nvrx_version == "0.7.0"
    argv = lc.launch_argv(cfg, RecoveryMode.INPROCESS_FT, Topology.from_config(cfg))
    i = argv.index("--ft-no-restart-exit-code")
    assert argv[i + 1] == str(cfg.ft.unrecoverable_exit_code)
    assert argv[argv.index("--ft-gpu-memory-poll-interval") + 1] == "0.1"  # NVRx's own default is 2 s
    assert not any("restart-policy" in a or "min-healthy" in a for a in argv)
    old = lc.launch_argv(make_cfg(image={"nvrx_version": "0.6.0"}), RecoveryMode.FT_LAUNCHER, Topology.from_config(cfg))
    assert "--ft-no-restart-exit-code" not in old and "--ft-gpu-memory-poll-interval" not in old


def test_section_timeouts_round_trip_through_nvrx_parser():
    sections = {"setup": 300.0, "step": 12.5, "checkpoint": 600.0, "eval": 90.0}
    text = lc.section_timeouts_arg(sections)
    assert text == "checkpoint:600,eval:90,setup:300,step:12.5"
    assert FaultToleranceConfig._parse_section_timeouts_arg(text) == sections


def test_shell_join_expands_only_variable_tokens():
    line = lc.shell_join(["echo", "is_host=${RDZV_IS_HOST}", "$HOME", "a b"])
    out = subprocess.run(["bash", "-c", f"RDZV_IS_HOST=yes; {line}"], capture_output=True, text=True, check=True)
    assert out.stdout == "is_host=yes $HOME a b\n"
    with pytest.raises(ValueError):
        lc.shell_join(['${A}"'])


def test_supervisor_script_is_valid_bash(cfg):
    for mode in RecoveryMode:
        script = lc.supervisor_script(cfg, mode, Topology.from_config(cfg))
        subprocess.run(["bash", "-n", "-c", script], check=True)
        assert 'exit "$(cat /tmp/training-unrecoverable)"' in script  # the worker's "fail the Job" code


#: A launcher for :func:`test_a_sigterm_between_launches_ends_the_pod_without_a_launcher_left_running`: it notes its
#: start, exits 1 at once the first time (the supervisor then relaunches), and waits in its "rendezvous" the next time,
#: noting a SIGTERM.
_FAKE_LAUNCHER = """
echo start >> "$LAUNCHES"
if [ "$(wc -l < "$LAUNCHES")" = 1 ]; then exit 1; fi
sleep 60 & s=$!
trap 'kill $s; echo stopped >> "$LAUNCHES"; exit 143' TERM
wait $s
"""


@pytest.mark.parametrize("window", ["relaunch pause", "launch event"])
def test_a_sigterm_between_launches_ends_the_pod_without_a_launcher_left_running(tmp_path, window):
    """A pod deleted while no launcher runs (a failed Job's pods, an eviction) must not start one: it would wait in
    its rendezvous for peers that are gone until the SIGKILL at the end of the grace period (seen on the local
    cluster: a failed Job's pod 0 relaunched during its pause and was killed 30 s later). ``relaunch pause``: the
    SIGTERM comes in the pause after a relaunch decision (a foreground ``sleep`` deferred the trap until its end);
    ``launch event``: it comes while the second launch records its event, before the launcher starts. The trap marks
    the drain (``NodeFiles.drain``, a stale mark removed at start): the workers' final save follows it, a launcher's
    own SIGTERM to its group finds none (training.resilience.sigterm.draining)."""
    pause = 30 if window == "relaunch pause" else 0
    cfg = make_cfg(
        storage={"mount_path": str(tmp_path / "fsx")}, job={"prefork_workers": False, "relaunch": {"delay_s": pause}}
    )
    topology = Topology.from_config(cfg)
    files = lc.NodeFiles.under(tmp_path)
    launch = lc.shell_join(lc.supervised_launch(cfg, lc.launch_argv(cfg, RecoveryMode.K8S_ONLY, topology, files=files)))
    event = lc.shell_join(lc.launch_event_argv(cfg, RecoveryMode.K8S_ONLY, topology, "torchrun"))
    script = lc.supervisor_script(cfg, RecoveryMode.K8S_ONLY, topology, files=files)
    assert launch in script and event in script
    # the second launch's event takes 3 s (a trap waits for a foreground command); the decision: relaunch
    slow_event = 'if [ "$POD_RELAUNCH" = 1 ]; then sleep 3; fi' if window == "launch event" else "true"
    script = script.replace(event, slow_event).replace(launch, f"bash -c {shlex.quote(_FAKE_LAUNCHER)}")
    decide = script[script.index("decision=$(") : script.index(") || decision=")]
    assert "training.resilience.supervisor decide" in decide
    script = script.replace(decide, "decision=$(echo relaunch a peer was lost")
    launches, log, drain = tmp_path / "launches", tmp_path / "supervisor.log", Path(files.drain)
    drain.touch()  # stale
    env = {**os.environ, "JOB_COMPLETION_INDEX": "0", "LAUNCHES": str(launches)}
    with log.open("w") as out:  # a file: the pause's orphaned sleep would hold a pipe open
        proc = subprocess.Popen(["bash", "-c", script], env=env, stdout=out, stderr=subprocess.STDOUT)
    waited_for = "launch 1: torchrun" if window == "launch event" else "launcher exited 1: relaunch a peer was lost"
    deadline = time.monotonic() + 30
    while waited_for not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # into the pause (or the slow event): a SIGTERM there finds no launcher
    assert not drain.exists()  # the relaunch was no drain
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=20)  # before the pause ends (30 s) or the old code's launcher gives up (60 s)
    finally:
        proc.kill()
    assert rc == 143, log.read_text()
    assert drain.exists()
    if window == "relaunch pause":  # no second launcher at all
        assert launches.read_text().split() == ["start"]
        assert "[supervisor] terminated before launch 1" in log.read_text()
    else:  # started after the trap had run, and stopped at once (before or after it noted its start)
        assert launches.read_text().split()[1:] in ([], ["start"], ["start", "stopped"])
        assert "[supervisor] terminated: launcher exited 143" in log.read_text()


# The worker's parent is the launcher; here a small Python parent stands in for it and reports SIGTERM.
_PARENT = """
import signal, subprocess, sys
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append("TERM"))
rc = subprocess.call(["bash", "-c", sys.argv[1], "w"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(rc, ",".join(got) or "-")
"""


def _as_child(script: str) -> tuple[int, str]:
    cmd = [sys.executable, "-c", _PARENT, script]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60)
    rc, signals = out.stdout.split()
    return int(rc), signals


def test_worker_script_marks_only_the_unrecoverable_code_and_stops_the_launcher(tmp_path, cfg):
    files = lc.NodeFiles(marker=str(tmp_path / "marker"), exit_log=str(tmp_path / "exits"))
    marker = tmp_path / "marker"
    code = cfg.ft.unrecoverable_exit_code
    script = lc.worker_script(cfg, module="platform_config.missing_module", files=files)
    # python -m <missing module> (through the template's stand-in, which starts it cold here: no template) exits 1:
    # no marker, the launcher is left alone (it may restart the worker)
    assert "python -m training.launch.prefork run platform_config.missing_module" in script
    assert _as_child(script) == (1, "-") and not marker.exists()
    fake = script.replace(
        "python -m training.launch.prefork run platform_config.missing_module",
        f"exit_with() {{ return $1; }}; exit_with {code}",
    )
    # the unrecoverable code: marker written and the launcher (the parent) told to stop before it can restart
    assert _as_child(fake) == (code, "TERM") and marker.read_text().strip() == str(code)
    assert shlex.quote(str(marker)) in script
    # every exit is logged for the supervisor: time, launcher restart count, local rank, code
    lines = [line.split() for line in (tmp_path / "exits").read_text().splitlines()]
    assert [(restart, rank, rc) for _, restart, rank, rc in lines] == [("0", "0", "1"), ("0", "0", str(code))]


def test_worker_script_logs_a_worker_its_launcher_stopped(tmp_path, cfg):
    """The launcher signals the worker's whole process group; the wrapper outlives the training process and logs
    143, which the supervisor reads as "stopped", not as a fault of this node."""
    files = lc.NodeFiles(marker=str(tmp_path / "marker"), exit_log=str(tmp_path / "exits"))
    script = lc.worker_script(cfg, module="platform_config.missing_module", files=files)
    sleeper = script.replace("python -m platform_config.missing_module", "sleep 30")
    proc = subprocess.Popen(
        ["bash", "-c", sleeper, "w"],
        start_new_session=True,
        env={**os.environ, "LOCAL_RANK": "3", "TORCHELASTIC_RESTART_COUNT": "2"},
    )
    deadline = time.monotonic() + 10
    while not _children(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=10) == 143
    (line,) = (tmp_path / "exits").read_text().splitlines()
    assert line.split()[1:] == ["2", "3", "143"]


def _children(pid: int) -> list[str]:
    try:
        return open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:  # gone (ENOENT) or ending (ESRCH)
        return []


@pytest.mark.parametrize("mode", [RecoveryMode.INPROCESS_FT, RecoveryMode.K8S_ONLY])
def test_supervisor_records_the_launch_event_before_the_launcher(tmp_path, cfg, mode):
    """The pod's start counts against goodput: the supervisor runs ``training.telemetry.events launch`` (for real, here
    with the run directory redirected) before it starts the launcher."""
    import os

    from tests.helpers.training_runs import REPO_ROOT
    from training.telemetry.events import read_events

    topology = Topology.from_config(cfg)
    script = lc.supervisor_script(cfg, mode, topology)
    argv = lc.launch_event_argv(cfg, mode, topology, lc.launcher_args(cfg, mode, topology)[0])
    line = lc.shell_join(argv)
    assert line in script
    launcher = lc.supervised_launch(cfg, lc.launch_argv(cfg, mode, topology))
    assert script.index(line) < script.index(lc.shell_join(launcher))
    local = [sys.executable, *argv[1:]]
    local[local.index("--run-dir") + 1] = str(tmp_path)
    env = {**os.environ, "GROUP_RANK": "1", "JOB_ATTEMPT": "2", "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run(local, cwd=REPO_ROOT, env=env, check=True, timeout=60)
    (event,) = read_events(tmp_path)
    assert event["event"] == "launch" and event["layer"] == "job" and event["rank"] == -1
    got = (event["node"], event["attempt"], event["nproc"], event["mode"])
    assert got == (1, 2, topology.nproc_per_node, mode.value)
    assert event["launcher"] == ("ft_launcher" if MODE_LAYERS[mode].ft_launcher else "torchrun")


def test_warm_workers_are_a_switch_of_the_pod_command(cfg):
    """``job.prefork_workers`` (default on): the supervisor keeps a worker template per pod and each worker is its
    stand-in, and so is the launcher; off, each worker is a cold ``python -m training.train``, the launcher a cold
    ``python -m`` of its module, and no template runs."""
    topology = Topology.from_config(cfg)
    on = lc.supervisor_script(cfg, RecoveryMode.INPROCESS_FT, topology)
    assert "export TRAINING_PREFORK_SOCKET=/tmp/training-prefork.sock" in on
    assert "python -m training.launch.prefork serve --socket /tmp/training-prefork.sock &" in on
    assert on.index("  start_prefork  #") < on.index("    until timeout 2 bash")  # imports overlap the host wait
    assert 'python -m training.launch.prefork run training.train "$@"' in lc.worker_script(cfg)
    # the launchers are forked from the template too, by module (ft_launcher's: NVRx's without its idle second)
    assert "\n  python -m training.launch.prefork run training.resilience.ft_launcher --nnodes " in on
    torchrun = lc.supervisor_script(cfg, RecoveryMode.K8S_ONLY, topology)
    assert "\n  python -m training.launch.prefork run torch.distributed.run --nnodes " in torchrun
    off_cfg = make_cfg(job={"prefork_workers": False})
    off = lc.supervisor_script(off_cfg, RecoveryMode.INPROCESS_FT, Topology.from_config(off_cfg))
    assert "prefork" not in off
    assert 'python -m training.train "$@"' in lc.worker_script(off_cfg)
    assert "\n  python -m training.resilience.ft_launcher --nnodes " in off


def test_a_pod_waits_for_a_lost_rendezvous_host_until_the_lost_peer_deadline_not_the_join_timeout(tmp_path):
    """Index 1 waits for index 0's replacement; the bound is ``job.lost_peer_deadline_s`` (2 s here), whatever the
    rendezvous join timeout (600 s): then exit 42 naming the deadline. The host name does not resolve here."""
    cfg = make_cfg(
        storage={"mount_path": str(tmp_path / "fsx")},
        job={"prefork_workers": False, "lost_peer_deadline_s": 2, "rendezvous": {"join_timeout_s": 600}},
    )
    files = lc.NodeFiles.under(tmp_path)
    script = lc.supervisor_script(cfg, RecoveryMode.K8S_ONLY, Topology.from_config(cfg), files=files)
    env = {**os.environ, "JOB_COMPLETION_INDEX": "1"}
    t0 = time.monotonic()
    out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 42, out.stdout + out.stderr
    assert "did not come back within job.lost_peer_deadline_s = 2 s" in out.stdout
    assert 1 <= time.monotonic() - t0 < 15  # whole seconds of `date +%s`
