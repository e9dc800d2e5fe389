"""Cluster room: a local Kubernetes for tests and demos, driven by the manifests ``cdk8s synth`` writes.

Owns the Job controller's documented semantics (indexes, podFailurePolicy, back-off) and pods as Linux namespaces.
May import: training.common, training.launch, training.telemetry, training.resilience, platform_config, charts.
"""
