"""From a Job manifest and one of its pods to what the sandbox runs: environment, mounts, hostname.

What the kubelet and the Job controller add to a pod's container is reproduced here: the downward API
(``fieldRef``), ``JOB_COMPLETION_INDEX`` (injected by the Job controller for Indexed Jobs), ``HOSTNAME``, ``$(VAR)``
expansion in env values, and the volumes (ConfigMap files, the PersistentVolumeClaim, ``emptyDir``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from training.cluster.controller import COMPLETION_INDEX, PodRun
from training.cluster.image import LocalImage
from training.cluster.manifest import JobManifest, ManifestError, quantity_bytes
from training.cluster.sandbox import Mount

_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class Storage:
    """Host directories behind the pod's volumes: one per claim and per ConfigMap, plus extra binds on a claim."""

    claims: dict[str, Path]
    config_maps: dict[str, Path]
    #: (path inside the pod, host directory) bound after the claims, e.g. the run directory on the claim.
    extra: tuple[tuple[str, Path], ...] = ()


def field_value(path: str, job: JobManifest, pod: PodRun, ip: str) -> str:
    """The downward-API value of ``fieldRef.fieldPath`` for ``pod`` (absent labels/annotations give "")."""
    simple = {
        "metadata.name": pod.name,
        "metadata.namespace": job.namespace,
        "spec.nodeName": pod.node,
        "status.podIP": ip,
        "status.hostIP": ip,  # no separate node network locally
    }
    if path in simple:
        return simple[path]
    m = _FIELD.match(path)
    if m:
        labels = {**job.labels, COMPLETION_INDEX: str(pod.index)}
        source = labels if m.group(1) == "labels" else pod.annotations
        return source.get(m.group(2), "")
    raise ManifestError(f"fieldRef {path!r} is not supported by the local cluster")


def gpu_slice(index: int, gpus_per_pod: int, host_gpus: int) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` of pod ``index``: on a host with CUDA GPUs, pod i gets GPUs i*P .. i*P+P-1, as if
    each pod ran on a node of its own whose device plugin allotted P GPUs (a replacement pod gets its index's GPUs
    again). None on a host without GPUs: the pods' workers then run on the CPU (gloo), as every local run does.

    Raises :class:`ManifestError` when the host has GPUs but fewer than the pods ask for together."""
    if host_gpus == 0 or gpus_per_pod == 0:
        return None
    first, last = index * gpus_per_pod, (index + 1) * gpus_per_pod
    if last > host_gpus:
        raise ManifestError(
            f"pod index {index} needs GPUs {first}..{last - 1} ({gpus_per_pod} a pod) but this host has {host_gpus}: "
            "use fewer --nodes or a smaller --nproc"
        )
    return ",".join(str(g) for g in range(first, last))


def container_env(
    job: JobManifest,
    pod: PodRun,
    ip: str,
    hostname: str,
    image: LocalImage,
    host_gpus: int = 0,
    driver_dir: str | None = None,
) -> dict[str, str]:
    """The container's environment: image env, ``HOSTNAME``, the pod's GPUs (:func:`gpu_slice`), the manifest's env
    (in order, ``$(VAR)`` expanded).

    A pod with GPUs also gets the host's NVIDIA driver libraries (``driver_dir``, after the image's
    ``LD_LIBRARY_PATH``), as the NVIDIA container toolkit gives a GPU container: the pod's environment starts empty,
    and a host whose driver is found through its own library path would otherwise leave the workers without CUDA."""
    env = {**image.container_env(), "HOSTNAME": hostname}
    visible = gpu_slice(pod.index, job.container.gpus, host_gpus)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
        if driver_dir:
            env["LD_LIBRARY_PATH"] = ":".join(filter(None, [env.get("LD_LIBRARY_PATH"), driver_dir]))
    declared: dict[str, str] = {"JOB_COMPLETION_INDEX": str(pod.index)} if job.indexed else {}
    for var in job.container.env:
        if var.field_path is not None:
            value = field_value(var.field_path, job, pod, ip)
        else:
            value = _VAR_REF.sub(lambda m: declared.get(m.group(1), m.group(0)), var.value or "")
        declared[var.name] = value
    return {**env, **declared}


def driver_mounts(job: JobManifest, host_gpus: int, driver_dir: str | None) -> list[Mount]:
    """The host's NVIDIA driver libraries, read-only at the same path, for a container that asks for GPUs on a host
    that has them (what the NVIDIA container toolkit mounts into a GPU container). The pod's root is an overlay of
    the host's root file system, which holds no other mount: a driver directory mounted into the host (a GPU
    container's ``/usr/local/nvidia``) is not there otherwise."""
    if not driver_dir or host_gpus == 0 or job.container.gpus == 0:
        return []
    return [Mount(driver_dir, "bind", Path(driver_dir), read_only=True)]


def volume_mounts(job: JobManifest, storage: Storage, image: LocalImage) -> list[Mount]:
    """Image files, then the container's volume mounts in order, then ``storage.extra``."""
    mounts = image.mounts()
    for vm in job.container.mounts:
        vol = job.volumes.get(vm.name)
        if vol is None:
            raise ManifestError(f"volumeMount {vm.name!r} names no volume of the pod")
        if vol.kind == "configMap":
            if vol.ref not in storage.config_maps:
                raise ManifestError(f"volume {vm.name}: ConfigMap {vol.ref!r} is not among the synthesized manifests")
            mounts.append(Mount(vm.mount_path, "bind", storage.config_maps[vol.ref], read_only=True))
        elif vol.kind == "persistentVolumeClaim":
            if vol.ref not in storage.claims:
                raise ManifestError(f"volume {vm.name}: no local directory for claim {vol.ref!r}")
            mounts.append(Mount(vm.mount_path, "bind", storage.claims[vol.ref], read_only=vm.read_only))
        elif vol.medium == "Memory":
            size = quantity_bytes(vol.size_limit) if vol.size_limit else 0
            mounts.append(Mount(vm.mount_path, "tmpfs", size_bytes=size))
        else:
            mounts.append(Mount(vm.mount_path, "tmpfs"))
    mounts += [Mount(target, "bind", source) for target, source in storage.extra]
    return mounts
