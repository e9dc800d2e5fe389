"""Common room: small helpers every other room may use (atomic JSON writes, sha256 of a file, the CUDA device count
without torch, a peer's failure told from an exception, the ``Terminated`` a worker's SIGTERM raises), the warm
worker start (``prefork``), the cheaper rendezvous method names its forked launchers get (``rendezvous_names``), the
per-process logging and NVRx socket names a forked process gets back (``import_identity``), and joining another
process's namespaces (``namespaces``: the local cluster's warm pods); also a process's start to the clock tick
(``process_start``).

Owns nothing else; it must stay free of torch and of every other room.
May import: the standard library only.
"""
