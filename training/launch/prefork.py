"""Warm worker start: a per-node template process that has imported the training code forks each worker.

A worker's cold start imports torch, DTensor, DCP and NVRx before it does anything: 1.8 CPU-s on the CPU machines,
4-7 s on the GPU image, paid again by every worker of every launch and every ft_launcher restart. Here one template
per node (pod) pays it once, off the restart path. The pod's supervisor has it fork the launcher (torchrun,
ft_launcher) too, which otherwise pays most of the same imports at every relaunch:

- ``python -m training.launch.prefork serve --socket PATH`` binds and listens on a Unix socket at once (a worker that
  connects early waits in the backlog), then imports :data:`WARM_MODULES`, freezes the collector, and serves: for
  each request it forks a child that becomes the worker, running the module as ``python -m`` would (``runpy``).
  The template never initialises CUDA (a forked CUDA context is unusable) and holds no thread when it forks.
- ``python -m training.launch.prefork run MODULE ARGS...`` (the worker as the launcher sees it: a light process, stdlib
  only) sends its argv, environment, working directory and standard streams (``SCM_RIGHTS``) to the template, and
  stands in for the forked worker: it forwards SIGTERM/SIGINT/SIGHUP/SIGUSR1/SIGUSR2 to it and ends as it ended
  (the same exit code, or killed by the same signal). The worker leads a process group of its own (it cannot join
  the stand-in's, which is in another session), so what it starts (NVRx's checkpoint writer, its in-process
  monitor) is signalled with it, and that group is killed when the worker ends, as the launcher kills a cold
  worker's group; when the stand-in dies (the launcher SIGKILLs its group) the worker kills its group, watching
  the stand-in through a pidfd.
- What multiprocessing's ``spawn`` starts in a forked process (NVRx's checkpoint writer and its write-results
  manager) is forked by the template too (:func:`route_spawns`): a stand-in (``spawned``) hands it the descriptors
  multiprocessing passed, at their numbers, and it runs ``spawn_main`` as the fresh interpreter would, with the
  training code already imported (2-3 CPU-s a child on the CPU machines, more on the GPU image).

Without a template (no ``TRAINING_PREFORK_SOCKET``, nothing listening within ``CONNECT_WAIT_S`` of asking, or the
template failed) ``run`` says so on stderr and starts the module cold (``exec``): a slower start, never a different
run.

Warm pods, for the local cluster's test runs (``training.local --nodes --template``): with ``TRAINING_PREFORK_ZYGOTE``
set, ``serve`` binds its socket, then asks the template at that path (the *zygote*, outside the pod) to *adopt* it.
The zygote forks a child that joins the requester's namespaces and root (:mod:`training.launch.namespaces`) and forks
the pod's template there, already imported, serving on the requester's listening socket after checking that every
module it holds is the file this pod's own interpreter would have imported. The requester stands in for it as
``run`` does for a worker, and asks again when it is SIGKILLed (the pod's supervisor kills every process but the one
it started after each launch). A refusal, or no zygote listening within ``CONNECT_WAIT_S``, is said on stderr, and the
pod imports as usual.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import sys
import time

# A stand-in (``run``) starts for every worker and launcher: it imports only what it uses (the module's import cost
# 55 -> 34 CPU-ms on the 2-core machine, 2026-12-04); the template's side imports the rest where
# it is used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: The template's socket, for ``run`` (set by whoever started the template: the pod's supervisor, training.local).
SOCKET_ENV = "TRAINING_PREFORK_SOCKET"
#: What the template imports before it serves: what a worker imports before training (``training.train.setup``
#: imports torch._dynamo, 1.5 s of it on CPU; building NVRx's Wrapper imports its in-process package), and the
#: launchers (little more: the training code has imported most of theirs).
#: The module of each launcher, which the template forks as ``python -m`` would: the pod's supervisor and
#: ``training.local`` start the launcher this way, with the template or without. torchrun's is its console script's;
#: ft_launcher's runs NVRx's (0.4.1 and 0.7.0 alike) without its rendezvous's idle second
#: (training.resilience.ft_launcher).
LAUNCHER_MODULES = {
    "torchrun": "torch.distributed.run",
    "ft_launcher": "training.resilience.ft_launcher",
}
WARM_MODULES = (
    "training.train",
    "training.trainer",
    "torch._dynamo",
    "nvidia_resiliency_ext.inprocess",
    *LAUNCHER_MODULES.values(),
)
#: Set in a pod by the local cluster when its caller keeps a template: that template's socket, inside the pod.
ZYGOTE_ENV = "TRAINING_PREFORK_ZYGOTE"
#: Set in the worker: its stand-in's pid, the pid its launcher started and logs (events carry it).
LAUNCHER_PID_ENV = "TRAINING_LAUNCHER_PID"
#: Seconds a stand-in waits for a template whose socket is not there yet (it binds first thing, before its imports).
CONNECT_WAIT_S = 5.0
#: A pod's adopted template SIGKILLed more than this many times within :data:`REPLACE_WINDOW_S` is not replaced
#: again: its stand-in ends as it did, as a pod whose own template was killed would (a kill that keeps coming, the
#: OOM killer's, must reach the pod's supervisor rather than loop here).
REPLACE_LIMIT = 3
REPLACE_WINDOW_S = 60.0
#: Signals the stand-in forwards to the worker.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
#: The most descriptors a request may carry: the standard streams and what multiprocessing passes a spawned child (its
#: queues' pipes, the resource tracker's, the spawn's own pipe and sentinel).
MAX_FDS = 64
_HEADER = struct.Struct("!I")


def _send_json(conn: socket.socket, obj: object, fds: Sequence[int] = ()) -> None:
    data = json.dumps(obj).encode()
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    conn.sendmsg([_HEADER.pack(len(data)) + data], ancillary)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        buf += chunk
    return buf


def _recv_json(conn: socket.socket, max_fds: int = 0) -> tuple[dict, list[int]]:
    fds = array.array("i")
    msg, ancdata, _, _ = conn.recvmsg(_HEADER.size, socket.CMSG_SPACE(max_fds * fds.itemsize) if max_fds else 0)
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(msg) < _HEADER.size:
        msg += _recv_exact(conn, _HEADER.size - len(msg))
    (size,) = _HEADER.unpack(msg)
    return json.loads(_recv_exact(conn, size)), list(fds)


# ---- the stand-in (``run``) --------------------------------------------------------------------------------------


def run(module: str, args: list[str]) -> int:
    """Have the template fork ``python -m module args``; end as it ends. Starts it cold without a template."""
    request = {"module": module, "args": args}
    return _stand_in(os.environ.get(SOCKET_ENV, ""), request, (), lambda: [sys.executable, "-m", module, *args], module)


def spawned(path: str, kwds: dict[str, int]) -> int:
    """Stand in for a child that multiprocessing's ``spawn`` starts in a forked process (:func:`route_spawns`): the
    template at ``path`` forks it with this process's streams and every descriptor multiprocessing passed here, at
    its number (the pickled process and its queues name them by number), and it runs ``spawn_main(**kwds)``. Starts
    it cold, as multiprocessing would have, without a template."""
    passed = [fd for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")) if fd > 2 and _is_open(fd)]

    def cold() -> list[str]:
        from multiprocessing import spawn

        return spawn.get_command_line(**kwds)

    return _stand_in(path, {"spawn": kwds, "fds": passed}, passed, cold, "a multiprocessing spawn child")


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:  # the directory listing's own descriptor, closed by now
        return False
    return True


def _stand_in(path: str, request: dict, passed: Sequence[int], cold: Callable[[], list[str]], what: str) -> int:
    """Send ``request`` (with this process's environment, directory and pid; its standard streams and ``passed``) to
    the template at ``path``, forward signals to what it forks and end as that ends; ``exec`` ``cold()`` instead,
    saying why on stderr, when there is no template or it refuses."""
    if not path:
        return _cold(cold, what, f"{SOCKET_ENV} is not set")
    # Forwarding starts before the request: the worker may run (and write to this process's streams) before the
    # template's answer names it, and a signal meanwhile is kept for it rather than ending this process alone.
    forwarder = _Forwarder()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _connect(conn, path)
        request = {**request, "env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid()}
        _send_json(conn, request, fds=(0, 1, 2, *passed))
        reply, _ = _recv_json(conn)
    except OSError as err:
        conn.close()
        return _cold(cold, what, f"no template at {path} ({err})", forwarder.received)
    if "error" in reply:
        conn.close()
        return _cold(cold, what, f"the template at {path} refused: {reply['error']}", forwarder.received)
    group = int(reply["pid"])  # the worker leads its own process group
    forwarder.attach(group)
    status = _wait_for(conn, group, "worker")
    _forward(group, signal.SIGKILL)  # what the worker left running, as the launcher does to a cold worker's group
    return 1 if status is None else _end_as(status)


def _wait_for(conn: socket.socket, group: int, what: str) -> int | None:
    """The wait status of the forked ``group`` that the template sends when it ends; None (the group killed) when
    the template is lost first."""
    try:
        status, _ = _recv_json(conn)
    except (OSError, ConnectionError) as err:
        _forward(group, signal.SIGKILL)
        print(f"[prefork] lost the template while {what} {group} ran ({err}): {what} killed", file=sys.stderr)
        return None
    finally:
        conn.close()
    return int(status["status"])


def _connect(conn: socket.socket, path: str) -> None:
    """Connect to the template at ``path``, waiting up to :data:`CONNECT_WAIT_S` for one that is still starting (its
    socket not bound yet: a forked launcher's first worker, or the launcher itself, can come within milliseconds)."""
    deadline = time.monotonic() + CONNECT_WAIT_S
    while True:
        try:
            conn.connect(path)
            return
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _forward(group: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


class _Forwarder:
    """Handles :data:`FORWARDED` from its creation on: each goes to the attached process group, and the last one that
    came before a group was attached is sent to it on :meth:`attach`. ``received``: every such signal, in order."""

    def __init__(self) -> None:
        self.group = 0
        self.received: list[int] = []
        for sig in FORWARDED:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, sig: int, _frame: object) -> None:
        self.received.append(sig)
        if self.group:
            _forward(self.group, sig)

    def attach(self, group: int) -> None:
        self.group = group
        if self.received:  # a signal that came while asking
            _forward(group, self.received[-1])


def _end_as(wait_status: int) -> int:
    """Exit as the worker did: its exit code, or the signal that killed it (so the launcher sees the same)."""
    if os.WIFSIGNALED(wait_status):
        return _die_by(os.WTERMSIG(wait_status))
    return os.waitstatus_to_exitcode(wait_status)


def _die_by(sig: int) -> int:
    """End this process by ``sig``, its default action restored (128 + ``sig`` should it survive)."""
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught, so never need resetting
        signal.signal(sig, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), sig)
    return 128 + sig


def _cold(argv: Callable[[], list[str]], what: str, why: str, signalled: Sequence[int] = ()) -> int:
    """Start ``what`` cold in this process (``exec`` of ``argv()``), unless a forwarded signal came first
    (``signalled``): then end by it, as this process would have without a handler."""
    if signalled:
        return _die_by(signalled[-1])
    print(f"[prefork] cold start of {what}: {why}", file=sys.stderr, flush=True)
    command = argv()
    os.execv(command[0], command)
    return 1  # not reached


# ---- the template (``serve``) ------------------------------------------------------------------------------------


def serve(path: str, modules: Sequence[str] = WARM_MODULES) -> int:
    """Listen at ``path``, import ``modules`` (or stand in for a template the zygote forks here: ``ZYGOTE_ENV``),
    then fork one worker per request until SIGTERM."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)  # workers that connect from here on wait until the imports are done
    zygote = os.environ.get(ZYGOTE_ENV, "")
    code = _stand_in_for_adopted(zygote, path, listener) if zygote else None
    if code is not None:
        listener.close()
        os.unlink(path)
        return code
    return _serve(listener, path, modules)


def _serve(
    listener: socket.socket, path: str, modules: Sequence[str], *, watch: int | None = None, note: str = ""
) -> int:
    """The template's loop on ``listener`` (bound at ``path``); ``watch``: a stand-in's pid to end with (an adopted
    template, which leaves ``path`` to it)."""
    import gc
    import importlib
    import select

    from training.launch import import_identity, rendezvous_names

    wake_r, wake_w = os.pipe()  # signals wake the select loop (a SIGCHLD: a worker to reap; SIGTERM: stop)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    gc.disable()
    if modules:  # an adopted template imports nothing: what its zygote recorded holds
        with import_identity.recording():
            for name in modules:
                importlib.import_module(name)
    rendezvous_names.cheapen(load=True)  # the forked launchers' rendezvous events, without a scan of sys.modules each
    gc.collect()
    gc.freeze()
    gc.enable()
    refusal = _unforkable()
    print(
        f"[prefork] template {os.getpid()} ready at {path}{note}" + (f" but refusing: {refusal}" if refusal else ""),
        flush=True,
    )
    stand_in = [os.pidfd_open(watch)] if watch is not None else []
    workers: dict[int, socket.socket] = {}
    while not stop:
        readable, _, _ = select.select([listener, wake_r, *stand_in], [], [])
        if stand_in and stand_in[0] in readable:  # what stood in for this template (the pod's) is gone
            break
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap(workers)
        if listener in readable:
            conn, _ = listener.accept()
            _serve_one(conn, (listener, wake_r, wake_w), workers, refusal)
    listener.close()
    if watch is None:
        os.unlink(path)
    return 0


def _unforkable() -> str:
    """Why forking here would hand workers a broken process ("" if it would not)."""
    import threading

    if threading.active_count() > 1:
        return f"{threading.active_count()} threads after the imports"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialised by the imports"
    return ""


def _serve_one(
    conn: socket.socket, own: tuple[socket.socket, int, int], workers: dict[int, socket.socket], refusal: str
) -> None:
    """Fork a worker for the request on ``conn``; ``own`` (the listener, the wake-up pipe) is closed in the child."""
    try:
        request, fds = _recv_json(conn, max_fds=MAX_FDS)
    except (OSError, ConnectionError, ValueError):
        conn.close()
        return
    adopt = "adopt" in request  # 3 standard streams, the listening socket of the template to fork, what spawn passed
    expected = 3 + adopt + len(request.get("fds", ()))
    if refusal or len(fds) != expected:
        _send_json(conn, {"error": refusal or f"expected {expected} file descriptors, got {len(fds)}"})
        conn.close()
        for fd in fds:
            os.close(fd)
        return
    pid = os.fork()
    if pid == 0:  # the worker
        signal.set_wakeup_fd(-1)
        own[0].close()
        os.close(own[1])
        os.close(own[2])
        for other in workers.values():
            other.close()
        if adopt:
            _adopt(conn, request, fds)  # does not return
        conn.close()
        code = 1
        try:
            code = _become_spawned(request, fds) if "spawn" in request else _become_worker(request, fds)
        finally:  # never back into the template's loop, whatever happened
            os._exit(code)
    for fd in fds:
        os.close(fd)
    workers[pid] = conn
    if not adopt:  # an adopted template tells its own pid, as its pod numbers it
        _send_json(conn, {"pid": pid})


def _reap(workers: dict[int, socket.socket]) -> None:
    while workers:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = workers.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):  # the stand-in is gone; so (by its watcher) is the worker
                _send_json(conn, {"status": status})
            conn.close()


def _become_worker(request: dict, fds: list[int]) -> int:
    """In the forked child: take the stand-in's streams, environment and directory, then run the module's main."""
    inherited_tempdir = _multiprocessing_tempdir()
    _take_over(request, fds)
    os.environ[LAUNCHER_PID_ENV] = str(request["pid"])
    _die_with(int(request["pid"]))
    _fresh_process_state()
    route_spawns(os.environ.get(SOCKET_ENV, ""))
    import runpy

    # ``python -m MODULE ARGS`` as the interpreter runs it: the module's code as ``__main__`` (its imports are
    # already in ``sys.modules``), ``sys.argv[0]`` its file.
    sys.argv = [request["module"], *request["args"]]
    code = _run_main(lambda: runpy.run_module(request["module"], run_name="__main__", alter_sys=True))
    _remove_multiprocessing_tempdir(inherited_tempdir)
    return code


def _become_spawned(request: dict, fds: list[int]) -> int:
    """In the forked child: the stand-in's streams, environment and directory, and each descriptor multiprocessing
    passed it at the same number; then ``spawn_main``, as the ``python -c`` that multiprocessing starts runs it (its
    ``_bootstrap`` runs multiprocessing's own exit, so no temporary directory is left to remove here)."""
    _take_over(request, fds)
    _renumber(fds[3:], request["fds"])
    _die_with(int(request["pid"]))
    _fresh_process_state()
    route_spawns(os.environ.get(SOCKET_ENV, ""))
    from multiprocessing import spawn

    sys.argv = ["-c", "--multiprocessing-fork"]
    return _run_main(lambda: spawn.spawn_main(**request["spawn"]))


def _run_main(main: Callable[[], object]) -> int:
    """Run ``main`` as the interpreter runs ``__main__``: the code of its ``SystemExit``, 1 (the traceback printed)
    on an error; the standard streams flushed."""
    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _renumber(received: list[int], numbers: list[int]) -> None:
    """Put each of ``received`` at its place in ``numbers`` (inheritable, as multiprocessing passed it), moving them
    all above both lists first so that none is overwritten before it is placed."""
    import fcntl

    floor = max([*received, *numbers], default=0) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in received]
    for fd in received:
        os.close(fd)
    for fd, number in zip(moved, numbers, strict=True):
        os.dup2(fd, number)
        os.close(fd)


def _take_over(request: dict, fds: list[int]) -> None:
    """Become the requester's: a session of its own (the stand-in signals it, and kills it at the end, as a whole),
    default signal handlers, its standard streams (the first three of ``fds``), environment and directory."""
    os.setsid()
    for sig in (signal.SIGCHLD, signal.SIGTERM, *FORWARDED):
        signal.signal(sig, signal.SIG_DFL)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if os.environ.get("PYTHONUNBUFFERED"):
        sys.stdout.reconfigure(line_buffering=True, write_through=True)
        sys.stderr.reconfigure(line_buffering=True, write_through=True)


def _multiprocessing_tempdir() -> str | None:
    """The ``pymp-*`` directory multiprocessing made for this process (its listeners' sockets), if any: kept in its
    private per-process config, as ``multiprocessing.util.get_temp_dir`` (which would make one) reads it."""
    process = sys.modules.get("multiprocessing.process")
    return process.current_process()._config.get("tempdir") if process else None


def _remove_multiprocessing_tempdir(inherited: str | None) -> None:
    """What a fresh interpreter's exit does and this worker's ``os._exit`` skips: remove the directory
    multiprocessing made for the worker (not one ``inherited`` from the template, which is the template's)."""
    tempdir = _multiprocessing_tempdir()
    if tempdir and tempdir != inherited:
        shutil.rmtree(tempdir, ignore_errors=True)


def _die_with(pid: int) -> None:
    """SIGKILL this worker's process group once ``pid`` (its stand-in, which the launcher signals and kills) is gone."""
    import select
    import threading

    pidfd = os.pidfd_open(pid)

    def watch() -> None:
        select.select([pidfd], [], [])
        os.killpg(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="prefork-stand-in-watch", daemon=True).start()


def _fresh_process_state() -> None:
    """What a fresh interpreter would have that a fork shares with its siblings: its own logging set-up and NVRx's
    per-process names (:mod:`training.launch.import_identity`), torch's seeds and thread count."""
    from training.launch import import_identity

    import_identity.renew()
    torch = sys.modules.get("torch")
    if torch is None:
        return
    torch.seed()  # a fresh process draws its own initial seed (training then seeds explicitly)
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))


# ---- spawned children (multiprocessing's ``spawn``) --------------------------------------------------------------

#: What a spawned child's stand-in runs (``python -c``): ``sys.path`` first gets the directory that holds the
#: ``training`` package, which the spawning process's working directory need not be.
_SPAWNED_CODE = (
    "import sys; sys.path.insert(0, {root!r}); from training.launch.prefork import main; sys.exit(main(sys.argv[1:]))"
)


def route_spawns(path: str) -> None:
    """Have the template at ``path`` fork what multiprocessing's ``spawn`` start method starts in this process (NVRx's
    checkpoint writer and its write-results manager, which NVRx starts with ``spawn``): a stand-in (:func:`spawned`)
    instead of a fresh interpreter, whose imports of torch and the training code cost 2-3 CPU-s a child on the CPU
    machines. Nothing without a ``path``. The one place that changes multiprocessing: its ``spawn.get_command_line``,
    the command its POSIX ``spawn`` Popen and nothing else runs (CPython 3.8 to 3.14)."""
    if not path:
        return
    from multiprocessing import spawn

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = _SPAWNED_CODE.format(root=root)

    def command_line(**kwds: int) -> list[str]:
        return [spawn.get_executable(), "-c", code, "spawned", path, json.dumps(kwds)]

    spawn.get_command_line = command_line


# ---- warm pods (``ZYGOTE_ENV``) --------------------------------------------------------------------------------


def _stand_in_for_adopted(zygote: str, path: str, listener: socket.socket) -> int | None:
    """Have the template at ``zygote`` fork this pod a template serving on ``listener``, and stand in for it until it
    ends; ask again when it is SIGKILLed while this process is not stopping, up to :data:`REPLACE_LIMIT` times within
    :data:`REPLACE_WINDOW_S`. None, said on stderr, when the zygote is unreachable or refuses: the caller imports
    and serves itself."""
    forwarder = _Forwarder()
    kills: list[float] = []  # when its templates were SIGKILLed
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        request = {"adopt": path, "env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid()}
        request |= {"sys_path": sys.path, "zygote": zygote}
        try:
            _connect(conn, zygote)  # a zygote still starting, as a worker's template (it listens before importing)
            _send_json(conn, request, fds=(0, 1, 2, listener.fileno()))
            reply, _ = _recv_json(conn)
        except (OSError, ConnectionError) as err:
            reply = {"error": f"unreachable ({err})"}
        if "error" in reply:
            conn.close()
            if forwarder.received:  # told to stop while asking: no template of its own either
                return _die_by(forwarder.received[-1])
            for sig in FORWARDED:
                signal.signal(sig, signal.SIG_DFL)
            print(f"[prefork] no template from {zygote}: {reply['error']}; importing here", file=sys.stderr, flush=True)
            return None
        forwarder.attach(int(reply["pid"]))
        status = _wait_for(conn, forwarder.group, "template")
        if status is None:
            return 1
        if forwarder.received or not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            return _end_as(status)
        now, killed = time.monotonic(), forwarder.group
        kills = [t for t in kills if now - t < REPLACE_WINDOW_S] + [now]
        if len(kills) > REPLACE_LIMIT:
            why = f"{len(kills)} within {REPLACE_WINDOW_S:g} s"
            print(f"[prefork] template {killed} was killed, {why}: ending as it did", file=sys.stderr, flush=True)
            return _end_as(status)
        print(f"[prefork] template {killed} was killed: another from {zygote}", file=sys.stderr, flush=True)
        forwarder.group = 0


def _adopt(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the zygote's fork: join the requester's namespaces and root, fork its template there, end as that ends."""
    from training.launch import namespaces

    peer = -1
    try:
        peer = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
        namespaces.enter(peer)
        child = os.fork()  # in the requester's PID namespace
        if child == 0:
            code = 1
            try:
                code = _become_adopted_template(conn, request, fds)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
    except BaseException as err:
        with contextlib.suppress(OSError):
            _send_json(conn, {"error": f"could not fork a template into the namespaces of pid {peer}: {err}"})
        os._exit(1)
    code = 1
    try:
        conn.close()
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:  # killed by a signal: so is this process, for the zygote to tell its stand-in
            if -code not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
    finally:
        os._exit(code if code >= 0 else 128 - code)


def _become_adopted_template(conn: socket.socket, request: dict, fds: list[int]) -> int:
    """In the requester's namespaces: its streams, environment, directory and ``sys.path``, then its template."""
    _take_over(request, fds)
    listener = socket.socket(fileno=fds[3])
    sys.path[:] = request["sys_path"]
    foreign = _foreign_modules()
    if foreign:
        _send_json(conn, {"error": f"{len(foreign)} imported modules are not this pod's: {'; '.join(foreign[:3])}"})
        return 1
    _send_json(conn, {"pid": os.getpid()})
    conn.close()
    note = f" (forked into this pod from the template at {request['zygote']})"
    return _serve(listener, request["adopt"], (), watch=int(request["pid"]), note=note)


def _foreign_modules() -> list[str]:
    """Imported top-level modules that ``sys.path`` would load from another file (by size and mtime): a template
    forked from another interpreter's imports must hold what this pod's own would have imported."""
    import importlib.machinery

    def stamp(file: str) -> tuple[int, int] | None:
        try:
            st = os.stat(file)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    foreign = []
    for name, module in list(sys.modules.items()):
        loaded = getattr(module, "__spec__", None)
        if "." in name or name.startswith("__") or loaded is None or not loaded.has_location:
            continue  # a submodule (its package decides), __main__, built-in or frozen
        file = loaded.origin
        spec = importlib.machinery.PathFinder.find_spec(name, sys.path)
        origin = spec.origin if spec is not None else None
        if origin != file and (origin is None or stamp(origin) is None or stamp(origin) != stamp(file)):
            foreign.append(f"{name} ({file}, here {origin or 'not found'})")
    return foreign


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) >= 2 and argv[0] == "run" and not argv[1].startswith("-"):  # the stand-in: no argparse to import
        return run(argv[1], argv[2:])
    if len(argv) == 3 and argv[0] == "spawned":  # a spawn child's stand-in (route_spawns): no argparse either
        return spawned(argv[1], json.loads(argv[2]))
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="the template: import the training code, fork workers on request")
    s.add_argument("--socket", required=True)
    s.add_argument("--warm", action="append", help=f"a module to import first (repeatable; default {WARM_MODULES})")
    r = sub.add_parser("run", help="a worker: have the template fork MODULE with ARGS (cold start without one)")
    r.add_argument("module")
    r.add_argument("args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.command == "serve":
        return serve(args.socket, args.warm or WARM_MODULES)
    return run(args.module, args.args)


if __name__ == "__main__":
    sys.exit(main())
