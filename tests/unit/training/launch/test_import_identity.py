"""What the worker template's imports took from its own process is renewed in every forked process, with real forks:
NVRx's ft_launcher log format and IPC socket name the forked process, as they would in a fresh interpreter."""

from __future__ import annotations

import logging

from tests.helpers.training_runs import forked_stdout, python_stdout

#: A template's imports as NVRx's ft_launcher module does them (basicConfig naming the pid; a socket after the pid,
#: copied by another module), then a fork whose child renews them; stdlib and the module under test only.
FORK_SCRIPT = """
import logging, os, sys, tempfile, types
from training.launch import import_identity
os.environ["TMPDIR"] = "/tmp"
with import_identity.recording():
    logging.basicConfig(level="INFO", format=f"[ft_launcher{os.getpid()}] %(message)s")
    for name in ("nvidia_resiliency_ext.fake_launcher", "nvidia_resiliency_ext.fake_rendezvous", "other.module"):
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].FT_LAUNCHER_IPC_SOCKET = f"{tempfile.gettempdir()}/_ft_launcher{os.getpid()}.socket"
print("template", os.getpid(), flush=True)
child = os.fork()
if child == 0:
    os.environ["TMPDIR"] = sys.argv[1]  # the forked process's own environment, as a stand-in sends it
    renewed = import_identity.renew()
    print("child", os.getpid(), sorted(renewed), flush=True)
    for name in ("nvidia_resiliency_ext.fake_launcher", "nvidia_resiliency_ext.fake_rendezvous", "other.module"):
        print(name, sys.modules[name].FT_LAUNCHER_IPC_SOCKET, flush=True)
    print("root", len(logging.getLogger().handlers), logging.getLogger().level, flush=True)
    os._exit(0)
os.waitpid(child, 0)
print("template root", len(logging.getLogger().handlers), logging.getLogger().level, flush=True)
"""


def test_a_forked_child_gets_a_fresh_logging_set_up_and_nvrx_socket_names_after_its_own_pid(tmp_path) -> None:
    lines = python_stdout(["-c", FORK_SCRIPT, str(tmp_path)], timeout_s=60).splitlines()
    template = int(lines[0].split()[1])
    child = int(lines[1].split()[1])
    assert lines[1].split(" ", 2)[2] == (
        "['logging', 'nvidia_resiliency_ext.fake_launcher.FT_LAUNCHER_IPC_SOCKET', "
        "'nvidia_resiliency_ext.fake_rendezvous.FT_LAUNCHER_IPC_SOCKET', 'tempfile.tempdir']"
    )
    assert lines[2:5] == [  # under the child's own TMPDIR, as a fresh interpreter would name them
        f"nvidia_resiliency_ext.fake_launcher {tmp_path}/_ft_launcher{child}.socket",
        f"nvidia_resiliency_ext.fake_rendezvous {tmp_path}/_ft_launcher{child}.socket",
        f"other.module /tmp/_ft_launcher{template}.socket",  # not NVRx's: left alone
    ]
    assert lines[5] == f"root 0 {logging.WARNING}"  # as a fresh interpreter: no handler, WARNING
    assert lines[6] == f"template root 1 {logging.INFO}"  # the template keeps its own


def test_a_process_forked_from_the_tests_template_names_its_own_ft_launcher_socket(tmp_path) -> None:
    """The real NVRx modules, imported by the tests' template (which imports ft_launcher's module): a forked process
    finds its own pid in the socket name of the launcher module and of the rendezvous module that copied it."""
    out = forked_stdout("tests.helpers.prefork_payload", ["identity"], timeout_s=60, TMPDIR=str(tmp_path))
    lines = out.splitlines()
    pid = int(lines[0].split("pid=")[1].split()[0])
    sockets = [line.split()[2] for line in lines if line.startswith("payload nvidia_resiliency_ext.")]
    assert sockets == [f"{tmp_path}/_ft_launcher{pid}.socket"] * 2, (pid, sockets)  # its TMPDIR, not the template's
    assert f"payload root handlers=0 level={logging.WARNING}" in lines
