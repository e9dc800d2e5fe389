"""The restart layers' bookkeeping in a simulated job: budgets, generations and spare nodes.

Mirrors what the real stack counts (docs/kubernetes.md): each layer's restarts since its counter last reset (a new
process resets in-process's count, a new pod ft_launcher's too, a resubmitted job every count), the Job's failures
per node index (``backoffLimitPerIndex``; a lost node is not counted, as ``podFailurePolicy`` ignores
``DisruptionTarget``), the restart generation an event carries, and which spare nodes are free.
"""

from __future__ import annotations

from training.whatif.params import LAYERS, Scenario


class RestartBudgets:
    """Restart counts, generations and spare nodes of one simulated job."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.gen = {"restart": 0, "attempt": 0, "iteration": 0}
        self.used = dict.fromkeys(LAYERS, 0)  # restarts per layer since that layer's counter last reset
        self.pod_failures = [0] * sc.nodes  # the job layer's count, per node index (backoffLimitPerIndex)
        self.spare_free_at = [0.0] * sc.spares

    def left(self, layer: str, node: int, *, ignored: bool) -> bool:
        """Whether ``layer`` may restart once more (``ignored``: a lost node, which the Job does not count)."""
        budget = self.sc.layers[layer].budget
        if budget is None or (layer == "job" and ignored):
            return True
        return (self.pod_failures[node] if layer == "job" else self.used[layer]) < budget

    def failed_attempt(self, layer: str) -> None:
        """``layer`` tried and failed; the next layer takes over."""
        self.used[layer] += 1

    def charge(self, layer: str, node: int, *, node_loss: bool) -> None:
        """``layer`` recovered a fault on ``node`` ("resubmit": a new job, every budget starts again)."""
        if layer == "resubmit":
            self.used = dict.fromkeys(LAYERS, 0)
            self.pod_failures = [0] * self.sc.nodes
            return
        self.used.update(dict.fromkeys(LAYERS[: LAYERS.index(layer)], 0))
        self.used[layer] += 1
        if layer == "job" and not node_loss:  # podFailurePolicy ignores a lost node (DisruptionTarget)
            self.pod_failures[node] += 1

    def replacement_wait(self, tf: float) -> float:
        """A lost node at ``tf``: take a free spare (its own replacement arrives later), else wait for a new node."""
        for i, free_at in enumerate(self.spare_free_at):
            if free_at <= tf:
                self.spare_free_at[i] = tf + self.sc.node_replace_s
                return 0.0
        return self.sc.node_replace_s

    def bump_generation(self, layer: str) -> bool:
        """The generation after ``layer`` restarted; True when the workers are new processes (their first save is
        the first of the process again)."""
        g = self.gen
        if layer == "inprocess":
            g["iteration"] += 1
            return False
        if layer == "ft_launcher":
            g.update(restart=g["restart"] + 1, iteration=0)
        else:
            g.update(attempt=g["attempt"] + 1, restart=0, iteration=0)
        return True
