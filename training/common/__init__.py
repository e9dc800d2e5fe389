"""Common room: small helpers every other room may use (atomic JSON writes, sha256 of a file, the CUDA device count
without torch, a peer's failure told from an exception, the ``Terminated`` a worker's SIGTERM raises) and the warm
worker start (``prefork``).

Owns nothing else; it must stay free of torch and of every other room.
May import: the standard library only.
"""
