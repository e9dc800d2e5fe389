"""Launch room: the warm worker start (``prefork``: a per-pod template that forks workers and launchers), the cheaper
rendezvous method names its forked launchers get (``rendezvous_names``), the per-process names a fork gets back
(``import_identity``) and joining another process's namespaces (``namespaces``: the local cluster's warm pods).

Owns the template's socket protocol and the environment variables a launched process finds (``prefork``'s ``*_ENV``);
it stays free of torch (a stand-in starts for every worker and launcher) and of every other room.
May import: the standard library only.
"""
