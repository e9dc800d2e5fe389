"""A remote-shell agent for Open MPI between the pods of ``make preflight``'s nccl-tests run (standard library only).

Open MPI starts its daemon on every other host with ``<plm_rsh_agent> <host> <command ...>``, the way it would call
``ssh``. The image has no ``sshd`` (and ``sshd`` needs capabilities Pod Security ``baseline`` pods do not get), so
the second pod serves this instead and the first pod's ``mpirun`` uses it as its agent::

    python3 /opt/image/rsh.py serve                     # on every host but the first (port $RSH_PORT, 2222)
    mpirun --mca plm_rsh_agent "python3 /opt/image/rsh.py" ...   # runs: rsh.py <host> <command ...>

A request is one JSON line ``{"token": ..., "command": ...}``; the server runs ``/bin/sh -c <command>`` only when
the token equals its ``$RSH_TOKEN`` (a random secret that preflight gives both pods), streams its output back in
frames (``D`` + 4-byte length + bytes) and ends with ``X`` + its 4-byte exit status, which the client exits with.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import socketserver
import struct
import subprocess
import sys

#: Port of the server (``$RSH_PORT`` overrides it).
DEFAULT_PORT = 2222
#: Exit status of the client when the server refused the request or could not be reached.
REFUSED = 255


def _port() -> int:
    return int(os.environ.get("RSH_PORT", DEFAULT_PORT))


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        try:
            request = json.loads(self.rfile.readline())
            token, command = str(request["token"]), str(request["command"])
        except (ValueError, KeyError, TypeError):
            self._finish(REFUSED)
            return
        if not hmac.compare_digest(token.encode(), os.environ.get("RSH_TOKEN", "").encode()) or not token:
            self._frame(b"D", b"rsh: refused (bad token)\n")
            self._finish(REFUSED)
            return
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert proc.stdout is not None
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
            self._frame(b"D", chunk)
        self._finish(proc.wait())

    def _frame(self, kind: bytes, data: bytes) -> None:
        self.wfile.write(kind + struct.pack("!I", len(data)) + data)
        self.wfile.flush()

    def _finish(self, status: int) -> None:
        self.wfile.write(b"X" + struct.pack("!i", status))
        self.wfile.flush()


class Server(socketserver.ThreadingTCPServer):
    """The agent's server (one thread per request)."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, port: int, host: str = "0.0.0.0") -> None:
        super().__init__((host, port), _Handler)


def run(host: str, command: str, port: int | None = None, token: str | None = None) -> int:
    """Run ``command`` on ``host``'s server, copy its output to stdout, return its exit status."""
    token = os.environ.get("RSH_TOKEN", "") if token is None else token
    try:
        conn = socket.create_connection((host, port or _port()), timeout=60)
    except OSError as exc:
        print(f"rsh: cannot reach {host}: {exc}", file=sys.stderr)
        return REFUSED
    conn.settimeout(None)
    with conn, conn.makefile("rb") as stream:
        conn.sendall(json.dumps({"token": token, "command": command}).encode() + b"\n")
        out = sys.stdout.buffer
        while True:
            head = stream.read(5)
            if len(head) < 5:
                print(f"rsh: {host} closed the connection", file=sys.stderr)
                return REFUSED
            kind, size = head[:1], struct.unpack("!I", head[1:])[0]
            if kind == b"X":
                return struct.unpack("!i", struct.pack("!I", size))[0]
            out.write(stream.read(size))
            out.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:
        with Server(_port()) as server:
            server.serve_forever()
        return 0
    while args and args[0].startswith("-"):  # options an agent of ssh's kind may be given (e.g. -x)
        args = args[1:]
    if len(args) < 2:
        print("usage: rsh.py serve | rsh.py <host> <command ...>", file=sys.stderr)
        return 2
    return run(args[0], " ".join(args[1:]))


if __name__ == "__main__":
    sys.exit(main())
