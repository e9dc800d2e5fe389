"""Test-only module run as a worker through :mod:`training.launch.prefork` (stdlib only, so a template warms nothing).

``python -m tests.helpers.prefork_payload ACTION [ARG]``: prints its pid, parent pid, argv, ``PAYLOAD_ENV`` and working
directory, then ``exit CODE``, ``kill SIGNAL`` (itself), ``term`` (waits for SIGTERM, then exits 143) or ``sleep
PIDFILE`` (writes its pid to PIDFILE and sleeps) or ``spawn PIDFILE`` (starts a ``sleep`` child, writes the child's
pid to PIDFILE and exits 0, leaving the child behind) or ``names`` (prints the module of the rendezvous module's
``get_method_name``; the template warmed ``tests.helpers.rendezvous_stub``) or ``where`` (prints its hostname) or
``identity`` (NVRx's ft_launcher IPC socket names and the root logger's handlers and level, as a process forked from
the tests' template has them) or ``mp-spawn CODE [SOCKET]`` (starts a child with multiprocessing's ``spawn``, which
answers through a queue and a manager's queue with its pid and parent pid, then exits CODE, or kills itself by -CODE;
with SOCKET its spawns go to the template there instead of this process's).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def _spawned_child(answers: object, manager_queue: object, code: int) -> None:
    """The ``mp-spawn`` child: both queues must work (their pipes and the manager's socket), then exit ``code`` (a
    negative one: killed by that signal)."""
    manager_queue.put("manager")  # type: ignore[attr-defined]
    answers.put(f"pid={os.getpid()} ppid={os.getppid()} via={manager_queue.get(timeout=30)}")  # type: ignore[attr-defined]
    answers.close()  # type: ignore[attr-defined]
    answers.join_thread()  # type: ignore[attr-defined]  (the answer is in the pipe before any kill)
    if code < 0:
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    action, arg = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    print(f"payload pid={os.getpid()} ppid={os.getppid()} argv={sys.argv[1:]} env={os.environ.get('PAYLOAD_ENV')}")
    print(f"payload cwd={os.getcwd()} launcher={os.environ.get('TRAINING_LAUNCHER_PID')}", flush=True)
    if action == "exit":
        sys.exit(int(arg))
    if action == "kill":
        os.kill(os.getpid(), int(arg))
    if action == "term":
        signal.signal(signal.SIGTERM, lambda *_: (print("payload got SIGTERM", flush=True), os._exit(143)))
        print("payload waiting", flush=True)
        while True:
            time.sleep(0.1)
    if action == "where":
        import socket

        print(f"payload host={socket.gethostname()}", flush=True)
        sys.exit(0)
    if action == "identity":  # what training.launch.import_identity renewed after the fork (the tests' template)
        import logging

        from training.launch.import_identity import LAUNCHER_SOCKET

        for module in ("launcher", "_ft_rendezvous"):
            name = f"nvidia_resiliency_ext.fault_tolerance.{module}"
            print(f"payload {name} {sys.modules[name].__dict__[LAUNCHER_SOCKET]}", flush=True)
        root = logging.getLogger()
        print(f"payload root handlers={len(root.handlers)} level={root.level}", flush=True)
        sys.exit(0)
    if action == "names":  # whose get_method_name the rendezvous module (tests.helpers.rendezvous_stub) has
        from training.launch.rendezvous_names import MODULES

        print(f"payload get_method_name from {sys.modules[MODULES[0]].get_method_name.__module__}", flush=True)
        sys.exit(0)
    if action == "spawn":
        import subprocess

        Path(arg).write_text(str(subprocess.Popen(["sleep", "120"]).pid))
        sys.exit(0)
    if action == "mp-listener":  # multiprocessing's temporary directory, which only the interpreter's exit removes
        from multiprocessing.connection import Listener

        listener = Listener()  # an AF_UNIX socket in a new pymp-* directory of TMPDIR, left open
        print(f"payload listener={listener.address}", flush=True)
        sys.exit(0)
    if action == "mp-spawn":
        import multiprocessing

        if len(sys.argv) > 3:
            from training.launch.prefork import route_spawns

            route_spawns(sys.argv[3])
        ctx = multiprocessing.get_context("spawn")
        manager = ctx.Manager()  # a spawned child too
        answers, shared = ctx.Queue(), manager.Queue()
        child = ctx.Process(target=_spawned_child, args=(answers, shared, int(arg)))
        child.start()
        print(f"payload spawned {answers.get(timeout=60)}", flush=True)
        child.join(timeout=60)
        manager.shutdown()
        print(f"payload spawned exitcode={child.exitcode}", flush=True)
        sys.exit(0)
    if action == "sleep":
        Path(arg).write_text(str(os.getpid()))
        time.sleep(120)
