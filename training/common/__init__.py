"""Common room: small helpers every other room may use (atomic JSON writes, sha256 of a file, the CUDA device count
without torch, a peer's failure told from an exception, the ``Terminated`` a worker's SIGTERM raises, a process's
start to the clock tick: ``process_start``; a command line checked whole, every bad value in one message:
``arguments``). The warm worker start lives in ``training.launch``.

Owns nothing else; it must stay free of torch and of every other room.
May import: the standard library only.
"""
