"""The node fencing agent's Lambda code (:mod:`stacks.fencing.handler`), deployed by :mod:`stacks.node_fencing`."""
