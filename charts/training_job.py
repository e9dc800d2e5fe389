"""The training Job of one recovery mode: an Indexed Job, one pod per GPU node.

Kubernetes outer layer (see docs/kubernetes.md):

* ``podFailurePolicy`` rule 1: the trainer container exiting ``ft.unrecoverable_exit_code`` -> ``FailJob``
  (every pod is terminated, no retry, no CrashLoop);
* rule 2: a pod with the ``DisruptionTarget`` condition (node drained/lost, preemption, eviction) -> ``Ignore``:
  the pod is replaced and nothing is counted;
* every other failure counts against ``backoffLimitPerIndex = job.backoff_limit`` (per node index) and
  ``maxFailedIndexes = 0`` fails the Job when any index runs out; ``backoffLimit`` caps the total at
  ``job.backoff_limit x node_count``.
"""

from __future__ import annotations

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.efa_env import to_env_vars, training_env
from charts.launch_command import supervisor_script
from charts.names import TRAINER_CONTAINER, job_name, service_name, training_pod_labels
from charts.node_placement import node_selector, tolerations
from charts.pod_resources import pod_resources
from charts.pod_security import AUTOMOUNT_SERVICE_ACCOUNT_TOKEN, pod_security_context, training_security_context
from charts.topology import Topology
from charts.volumes import shared_mounts, shared_volumes
from platform_config import MODE_LAYERS, ProjectConfig, RecoveryMode
from training.resilience import startup_budget
from training.resilience.exit_codes import fail_job_exit_codes
from training.telemetry.emf import AGENT_PORT as EMF_AGENT_PORT
from training.telemetry.emf import ENDPOINT_ENV as EMF_ENDPOINT_ENV

SHM_VOLUME = "dshm"
#: backoffLimitPerIndex and podReplacementPolicy are on by default from 1.29 (beta), GA in 1.33 / 1.34.
MIN_KUBERNETES_MINOR = 29
#: This pod's index's earlier failures, set by the Job controller when ``backoffLimitPerIndex`` is used: counted ones,
#: and ignored ones (``podFailurePolicy`` Ignore: a lost node, an eviction; set only once there is one).
INDEX_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
IGNORED_FAILURES_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"


def _field_env(name: str, path: str) -> k8s.EnvVar:
    return k8s.EnvVar(name=name, value_from=k8s.EnvVarSource(field_ref=k8s.ObjectFieldSelector(field_path=path)))


def pod_failure_policy(cfg: ProjectConfig) -> k8s.PodFailurePolicy:
    """Exit codes that retrying cannot fix (unrecoverable, config error, no usable checkpoint) fail the Job;
    disruptions (node drain, preemption) are not counted."""
    return k8s.PodFailurePolicy(
        rules=[
            k8s.PodFailurePolicyRule(
                action="FailJob",
                on_exit_codes=k8s.PodFailurePolicyOnExitCodesRequirement(
                    container_name=TRAINER_CONTAINER,
                    operator="In",
                    values=fail_job_exit_codes(cfg.ft.unrecoverable_exit_code),
                ),
            ),
            k8s.PodFailurePolicyRule(
                action="Ignore",
                on_pod_conditions=[k8s.PodFailurePolicyOnPodConditionsPattern(type="DisruptionTarget", status="True")],
            ),
        ]
    )


class TrainingJob(Construct):
    """``batch/v1`` Job ``<job_name>-<mode>``: ``completionMode: Indexed``, parallelism = completions = nodes."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        cfg: ProjectConfig,
        mode: RecoveryMode,
        *,
        image: str,
        topology: Topology | None = None,
    ) -> None:
        super().__init__(scope, id)
        if cfg.cluster.minor < MIN_KUBERNETES_MINOR:
            raise ValueError(
                f"the training Job needs Kubernetes >= 1.{MIN_KUBERNETES_MINOR} (backoffLimitPerIndex, "
                f"podReplacementPolicy); cluster.kubernetes_version is {cfg.cluster.kubernetes_version}"
            )
        if MODE_LAYERS[mode].ft_launcher:
            late = startup_budget.problems(cfg)
            if late:
                lines = "\n  ".join(late)
                raise ValueError(f"ft_launcher would kill every new worker before its first heartbeat:\n  {lines}")
        topo = topology or Topology.from_config(cfg)
        self.name = job_name(cfg, mode)
        labels = training_pod_labels(cfg, mode)
        env = to_env_vars(training_env(cfg, mode, topo.instance))
        env += [
            # The supervisor adds the two into JOB_ATTEMPT (an annotation not set yet reads as "").
            _field_env("JOB_INDEX_FAILURES", f"metadata.annotations['{INDEX_FAILURE_COUNT_ANNOTATION}']"),
            _field_env("JOB_INDEX_IGNORED_FAILURES", f"metadata.annotations['{IGNORED_FAILURES_ANNOTATION}']"),
            _field_env("POD_NAME", "metadata.name"),
            _field_env("NODE_NAME", "spec.nodeName"),
        ]
        if cfg.observability.emf_metrics:
            # CloudWatch agent's EMF listener on this pod's node (the observability add-on runs it per node).
            env += [
                _field_env("HOST_IP", "status.hostIP"),
                k8s.EnvVar(name=EMF_ENDPOINT_ENV, value=f"udp://$(HOST_IP):{EMF_AGENT_PORT}"),
            ]
        container = k8s.Container(
            name=TRAINER_CONTAINER,
            image=image,
            command=["bash", "-c", supervisor_script(cfg, mode, topo)],
            env=env,
            ports=[
                k8s.ContainerPort(name="rendezvous", container_port=cfg.job.rendezvous_port, protocol="TCP"),
                k8s.ContainerPort(name="inproc-store", container_port=cfg.job.inprocess_store_port, protocol="TCP"),
            ],
            resources=pod_resources(topo.instance),
            security_context=training_security_context(),
            volume_mounts=[*shared_mounts(cfg), k8s.VolumeMount(name=SHM_VOLUME, mount_path="/dev/shm")],
        )
        shm = k8s.Volume(
            name=SHM_VOLUME,
            empty_dir=k8s.EmptyDirVolumeSource(
                medium="Memory", size_limit=k8s.Quantity.from_string(f"{cfg.job.shm_size_gib}Gi")
            ),
        )
        pod = k8s.PodSpec(
            restart_policy="Never",
            subdomain=service_name(cfg),
            service_account_name=cfg.job.service_account,
            automount_service_account_token=AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
            security_context=pod_security_context(),
            enable_service_links=False,
            # Long enough for an in-flight checkpoint to finish after SIGTERM.
            termination_grace_period_seconds=int(cfg.ft.section_timeouts_s["checkpoint"]),
            node_selector=node_selector(cfg, topo.instance),
            tolerations=tolerations(cfg),
            containers=[container],
            volumes=[*shared_volumes(cfg), shm],
        )
        self.resource = k8s.KubeJob(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=labels),
            spec=k8s.JobSpec(
                completion_mode="Indexed",
                completions=topo.nodes,
                parallelism=topo.nodes,
                backoff_limit_per_index=cfg.job.backoff_limit,
                max_failed_indexes=0,
                backoff_limit=cfg.job.backoff_limit * topo.nodes,
                pod_replacement_policy="Failed",
                pod_failure_policy=pod_failure_policy(cfg),
                ttl_seconds_after_finished=cfg.job.ttl_seconds_after_finished,
                template=k8s.PodTemplateSpec(metadata=k8s.ObjectMeta(labels=labels), spec=pod),
            ),
        )
