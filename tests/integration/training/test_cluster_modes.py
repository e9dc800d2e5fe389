"""Every recovery mode on the local cluster (``training.local --nodes``, the training Job's own manifests): the
5-fault schedule ends with the fault-free state, and a fault that repeats past ``faults.max_repeats`` ends in a
Failed Job with the FailJob reason.

The schedule (tests/helpers/cluster_schedule.py): an exception on rank 1, the node of index 1 lost (the rendezvous
host's peer), a SIGKILL of rank 0's worker, the node of index 0 lost (the rendezvous host itself) and an eviction of
index 1, 2 pods x 1 worker. Each mode must end with the state of a single-host fault-free run on the very data the
cluster's dataset Job prepared (the cluster changes where the ranks run, not what they compute), with every fault
recovered by the layer ``docs/recovery-layers.md`` names for its mode, and with the Job counting no failure for the
lost nodes and the eviction. The default mode (``inprocess-ft``) is also checked for its annotations, its restore
tiers and the causes it reports.

All twelve runs go through one pool, :data:`~tests.helpers.cluster_schedule.AT_ONCE` at a time: a cluster run mostly
waits (a replacement pod after its node-replace delay, a rendezvous, a back-off). Their pods fork their worker template
from the test process's (warm pods: ``training.local --template``) instead of importing the training code, 4-6 CPU-s
a pod here, except the run of :data:`COLD`, whose pods import it as a cluster's do. Each run's manifests are
synthesized in the test process (:func:`~tests.helpers.training_runs.cluster_manifests`: one cdk8s jsii kernel, not
one per run) and handed to it (``--manifests``), which refuses them unless they were made from its own config.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cluster_schedule import FAULTS, STEPS, fault_free_reference, restarts_told, run_each, summary
from tests.helpers.training_runs import FAST_CONFIG, cluster_manifests, cluster_run
from training.cluster.controller import JOB_FINISHED

#: The first test waits for all twelve runs (the module fixture): 300 s on a fast 2-core machine, over 316 s (the
#: suite's per-test bound) on a slower one. Each run has its own timeout; this bound is only against a hang.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

#: The restarts per layer of FAULTS in each mode, from docs/recovery-layers.md's table: the exception and the SIGKILL
#: go to the mode's layers, the two lost nodes and the eviction to the job layer.
LAYERS = {
    "inprocess-ft": {"inprocess": 1, "ft_launcher": 1, "job": 3},  # exception in-process, SIGKILL ft_launcher
    "ft-launcher": {"inprocess": 0, "ft_launcher": 2, "job": 3},  # exception and SIGKILL: ft_launcher
    "inprocess": {"inprocess": 1, "ft_launcher": 0, "job": 4},  # exception in-process; SIGKILL ends the pod (torchrun)
    "async-ckpt": {"inprocess": 0, "ft_launcher": 0, "job": 5},  # torchrun: every fault ends a pod
    "sync-ckpt": {"inprocess": 0, "ft_launcher": 0, "job": 5},  # the same, with synchronous saves
    "k8s-only": {"inprocess": 0, "ft_launcher": 0, "job": 5},  # the baseline: no NVRx at all
}
#: The layer the report gives the exception and the SIGKILL (docs/recovery-layers.md).
IN_POD_LAYERS = {
    "inprocess-ft": ("inprocess", "ft_launcher"),
    "ft-launcher": ("ft_launcher", "ft_launcher"),
    "inprocess": ("inprocess", "job"),
    "async-ckpt": ("job", "job"),
    "sync-ckpt": ("job", "job"),
    "k8s-only": ("job", "job"),
}
#: Counted failures (podFailurePolicy ``Count``): the in-pod faults a mode leaves to the job layer.
COUNTED = {"inprocess-ft": 0, "ft-launcher": 0, "inprocess": 1, "async-ckpt": 2, "sync-ckpt": 2, "k8s-only": 2}
#: The repeated fault: a sticky exception on rank 1 at start-up, before the model is built. One at step 3 ended with
#: the same pods (measured in k8s-only and inprocess-ft, 2026-12-05); failing before the set-up and the first step
#: saved about 1 CPU-s a run (busy CPU-s: 5.5 -> 4.6 and 3.9 -> 2.9).
REPEATED = "exception@0:1/init!"
#: Index 1's pods when :data:`REPEATED` repeats past ``max_repeats: 1``: (exit code, action). The rank
#: that next enters training after the second firing finds it twice in its failure ledger and exits 42. Recovered
#: in-process or by ft_launcher, that rank is in the same pod; recovered by the job layer (torchrun-only modes), the
#: pod ends with the fault's code 10 (counted, replaced) twice and the third pod exits 42.
INDEX1_PODS = {
    "inprocess-ft": [(42, "FailJob")],
    "ft-launcher": [(42, "FailJob")],
    "inprocess": [(42, "FailJob")],
    "async-ckpt": [(10, "Count"), (10, "Count"), (42, "FailJob")],
    "sync-ckpt": [(10, "Count"), (10, "Count"), (42, "FailJob")],
    "k8s-only": [(10, "Count"), (10, "Count"), (42, "FailJob")],
}
#: Runs whose pods import the training code themselves, as a cluster's do: the default mode's repeated-fault run (2
#: pods). A cold pod differs from a warm one only in where its template comes from; the launcher and the workers are
#: forked from it the same way in every mode, so one cold run covers the path (each cold pod costs 4-6 CPU-s).
COLD = {"fail-job/inprocess-ft"}
#: What a warm pod's template says when it is ready (training.launch.prefork).
FORKED_INTO_POD = "(forked into this pod from the template at /run/training-prefork-zygote.sock)"


@pytest.fixture(scope="module")
def all_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every cluster run of this module through one pool, the longer schedule runs first: ``schedule/<mode>`` and
    ``fail-job/<mode>`` under ``base``, and the fault-free reference ``schedule/reference``."""
    base = tmp_path_factory.mktemp("cluster-modes")
    fail_config = copy.deepcopy(FAST_CONFIG)
    fail_config["faults"] = {"max_repeats": 1}

    def run(key: str) -> Any:
        kind, mode = key.split("/")
        warm = key not in COLD
        if kind == "schedule":
            args: dict[str, Any] = {"steps": STEPS, "faults": FAULTS}
        else:
            args = {"steps": 12, "faults": REPEATED, "config": fail_config}
        manifests = cluster_manifests(base / "manifests" / key, nodes=2, mode=mode, **args)
        return cluster_run(base / key, nodes=2, mode=mode, warm=warm, manifests=manifests, timeout_s=420, **args)

    procs = run_each([f"schedule/{m}" for m in LAYERS] + [f"fail-job/{m}" for m in INDEX1_PODS], run)
    reference = fault_free_reference(base / "schedule" / "inprocess-ft", base / "schedule" / "reference")
    assert reference.returncode == 0, reference.stdout[-3000:] + reference.stderr[-3000:]
    return {"base": base, "procs": procs}


@pytest.fixture(scope="module")
def runs(all_runs: dict[str, Any]) -> dict[str, Any]:
    """The schedule runs by mode, and ``reference``."""
    base = all_runs["base"] / "schedule"
    procs = {key.split("/")[1]: p for key, p in all_runs["procs"].items() if key.startswith("schedule/")}
    return {"base": base, "procs": procs}


@pytest.fixture(scope="module")
def failed_runs(all_runs: dict[str, Any]) -> dict[str, Any]:
    """The repeated-fault runs by mode."""
    procs = {key.split("/")[1]: p for key, p in all_runs["procs"].items() if key.startswith("fail-job/")}
    return {"base": all_runs["base"] / "fail-job", "procs": procs}


def _status(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "job.json").read_text())


@pytest.mark.parametrize("mode", list(LAYERS))
def test_every_fault_is_survived_by_its_layer_and_the_state_is_the_fault_free_one(runs, mode):
    proc, run_dir = runs["procs"][mode], runs["base"] / mode
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    got, want = summary(run_dir), summary(runs["base"] / "reference")
    assert (got["final_step"], got["world_size"]) == (STEPS, 2)
    assert got["final_state_sha256"] == want["final_state_sha256"]
    assert got["restarts_by_layer"] == LAYERS[mode], restarts_told(run_dir)
    # in-pod faults fire at their step; a node fault at the first step the cluster sees at or after its own
    kinds = sorted((f.split("@")[0], f.split("(")[1].rstrip(")")) for f in got["faults"])
    assert kinds == [("evict", "pod 1"), ("exception", "rank 1"), ("node-loss", "pod 0"), ("node-loss", "pod 1"),
                     ("sigkill", "rank 0")]  # fmt: skip


@pytest.mark.parametrize("mode", list(LAYERS))
def test_lost_nodes_and_the_eviction_count_no_failure(runs, mode):
    """Two lost nodes and an eviction are ignored failures (podFailurePolicy ``Ignore`` on ``DisruptionTarget``) in
    every mode; an in-pod fault that the mode leaves to the job layer ends its pod and counts (``Count``): none in
    inprocess-ft and ft-launcher, the SIGKILL in inprocess (exit 137), the SIGKILL and the exception in the
    torchrun-only modes."""
    status = _status(runs["base"] / mode)
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    pods = [(p["index"], p["attempt"], p["exit_code"], p["pod_failure_policy_action"]) for p in status["pods"]]
    counts = (status["succeeded"], status["failed"], status["ignoredFailures"])
    assert counts == (2, COUNTED[mode], 3), f"{pods}\n{restarts_told(runs['base'] / mode)}"
    ignored = [p for p in status["pods"] if p["pod_failure_policy_action"] == "Ignore"]
    reasons = sorted((p["index"], c["reason"]) for p in ignored for c in p["conditions"])
    assert reasons == [(0, "DeletionByTaintManager"), (1, "DeletionByTaintManager"), (1, "EvictionByEvictionAPI")]


@pytest.mark.parametrize("mode", list(LAYERS))
def test_the_report_gives_each_node_fault_to_the_job_layer(runs, mode):
    from training.telemetry.goodput import analyze, load_events

    run = analyze(load_events(runs["base"] / mode).events)
    node_faults = [f for f in run.faults if f.injected and f.kind in ("node-loss", "evict")]
    assert sorted((f.kind, f.pod) for f in node_faults) == [("evict", 1), ("node-loss", 0), ("node-loss", 1)]
    assert all(f.layer == "job" and f.recovery_s is not None and f.recovery_s > 0 for f in node_faults)
    by_kind = {f.kind: f.layer for f in run.faults if f.injected}
    assert (by_kind["exception"], by_kind["sigkill"]) == IN_POD_LAYERS[mode], restarts_told(runs["base"] / mode)


@pytest.mark.parametrize("mode", list(LAYERS))
def test_every_restart_names_the_fault_that_caused_it(runs, mode):
    """A restart's cause is the newest fault injected before it: a node lost after an in-process recovery is
    ``node-loss``, not the exception recovered earlier (a run on 2026-12-01 said ``exception``)."""
    from training.telemetry.events import read_events

    newest, told = None, []
    for e in read_events(runs["base"] / mode):
        if e["event"] == "fault_injected":
            newest = e["kind"]
        elif e["event"] == "restart_begin":
            told.append((e["layer"], e["cause"], newest))
    assert all(cause == newest for _, cause, newest in told), told
    assert {cause for _, cause, _ in told} == {"exception", "node-loss", "sigkill", "evict"}, told


def test_the_default_mode_replaces_only_the_faulty_indexes_pods(runs):
    """inprocess-ft: the pod of index 1 that finished is its third (after the lost node's pod and the evicted one);
    index 0's second, after its lost node; no counted failure on either index."""
    status = _status(runs["base"] / "inprocess-ft")
    final = {p["index"]: p for p in status["pods"] if p["pod_failure_policy_action"] == "Succeeded"}
    annotations = {i: final[i]["annotations"] for i in (0, 1)}
    assert final[1]["attempt"] == 2 and annotations[1]["batch.kubernetes.io/job-index-ignored-failure-count"] == "2"
    assert final[0]["attempt"] == 1 and annotations[0]["batch.kubernetes.io/job-index-ignored-failure-count"] == "1"
    assert annotations[0]["batch.kubernetes.io/job-index-failure-count"] == "0"


def test_a_replaced_node_restores_from_its_peer_s_memory(runs):
    """inprocess-ft: every fault rolls back at most the memory tier's interval (5); the node lost at index 0 after
    the snapshot of step 25 comes back from the copy rank 1 holds of rank 0's snapshot (tier ``peer``), the
    survivors from their own /dev/shm, not from storage."""
    from training.telemetry.goodput import analyze, load_events

    events = load_events(runs["base"] / "inprocess-ft").events
    run = analyze(events)
    assert all(f.rollback_steps is not None and f.rollback_steps <= 5 for f in run.faults if f.injected)
    node0 = next(f for f in run.faults if f.kind == "node-loss" and f.pod == 0)
    assert (node0.restored_step, node0.restore_tier) == (25, "peer")
    restore = next(e for e in events if e["event"] == "restore" and e["from_step"] == 25 and e["tier"] == "peer")
    assert restore["per_rank_tier"] == ["peer", "shm"]


@pytest.mark.parametrize("mode", list(INDEX1_PODS))
def test_a_repeated_fault_fails_the_job_with_the_fail_job_reason(failed_runs, mode):
    proc, run_dir = failed_runs["procs"][mode], failed_runs["base"] / mode
    assert proc.returncode == 42, (proc.stdout + proc.stderr)[-4000:]
    assert "Job Failed: PodFailurePolicy" in proc.stdout
    status = _status(run_dir)
    assert status["conditions"][-1]["type"] == "Failed" and status["conditions"][-1]["reason"] == "PodFailurePolicy"
    index1 = [p for p in status["pods"] if p["index"] == 1]
    assert [(p["exit_code"], p["pod_failure_policy_action"]) for p in index1] == INDEX1_PODS[mode]
    counts = [p["annotations"]["batch.kubernetes.io/job-index-failure-count"] for p in index1]
    assert counts == [str(n) for n in range(len(index1))]
    # index 0 never failed on its own: its supervisor relaunched in place each time it lost its peer, and the Job's
    # failure ended its one pod, which no podFailurePolicy rule then applies to
    (index0,) = [p for p in status["pods"] if p["index"] == 0]
    assert index0["pod_failure_policy_action"] == JOB_FINISHED


def test_warm_pods_fork_their_template_and_cold_pods_import_it(all_runs):
    """Every training pod's template of a warm run was forked into it (none imported, none fell back, no worker
    started cold); every one of a :data:`COLD` run imported the training code itself."""
    for key in all_runs["procs"]:
        logs = [p.read_text() for p in (all_runs["base"] / key / "pods").glob("*.log") if "prepare-data" not in p.name]
        ready = [x for log in logs for x in log.splitlines() if x.startswith("[prefork] template ") and " ready " in x]
        forked = [x.endswith(f" ready at /tmp/training-prefork.sock {FORKED_INTO_POD}") for x in ready]
        assert ready and (not any(forked) if key in COLD else all(forked)), (key, ready)
        assert not any("no template from" in log or "cold start" in log for log in logs), key


def test_a_forked_ft_launcher_names_its_own_pod(all_runs):
    """ft_launcher, forked from a template that imported it outside the pod (a warm pod's), logs as a launcher
    started in the pod would: its host is the pod's hostname (``<job>-<index>``), by which a worker's logged exit is
    matched to its events (training.telemetry.exits); it was the test machine's, the template's."""
    base = all_runs["base"] / "schedule" / "inprocess-ft"
    for log in sorted((base / "pods").glob("fsdp-train-inprocess-ft-*.log")):
        hosts = set(re.findall(r"\[ft_launcher\d+@([^\]\s]+)\]", log.read_text()))
        assert hosts == {log.stem.rsplit("-", 1)[0]}, (log.name, hosts)


@pytest.mark.parametrize("mode", list(LAYERS))
def test_only_the_published_baseline_runs_without_the_memory_tier(runs, mode):
    """k8s-only (the published baseline) restores from storage only, every other mode snapshots to host memory."""
    from training.telemetry.events import read_events

    events = read_events(runs["base"] / mode)
    tiers = {e["tier"] for e in events if e["event"] == "restore"}
    snapshots = [e for e in events if e["event"] == "mem_snapshot"]
    if mode == "k8s-only":
        assert not snapshots and tiers == {"none", "storage"}, tiers
    else:
        assert snapshots and tiers - {"none", "storage"}, tiers


@pytest.mark.parametrize("mode", list(LAYERS))
def test_a_forked_worker_s_events_name_its_own_pod(runs, mode):
    """Every worker event carries the host name of the pod it ran in, as the pod's supervisor's ``launch`` events
    do: workers forked from a template that imported the event log outside the pod said the test machine's."""
    from training.telemetry.events import read_events

    events = read_events(runs["base"] / mode)
    pods = {e["host"] for e in events if e["event"] == "launch"}
    assert pods == {f"fsdp-train-{mode}-0", f"fsdp-train-{mode}-1"}
    assert {e["host"] for e in events if e["rank"] >= 0} == pods


@pytest.mark.parametrize("mode", ["inprocess-ft", "inprocess"])
def test_a_lost_node_s_survivor_leaves_nvrx_s_in_process_layer_without_a_store_error(runs, mode):
    """NVRx's sibling monitor enters the termination barrier for the lost rank; before
    ``training.resilience.inprocess.fix_initial_ranks`` it wrote that rank as ``"b'1'"`` and every survivor's exit
    said ``(then, tearing down: ValueError: invalid literal for int() with base 10: "b'1'")`` (recorded, NVRx 0.4.1).
    In inprocess-ft the survivor of index 1's loss ends with the in-process layer's own reason only. The survivor of
    index 0's loss cannot: NVRx's store is served from ``MASTER_ADDR``, index 0's pod, and went with it, so that rank
    leaves as a lost peer through the store's ``DistNetworkError`` (the same at 389afb0, before the final save)."""
    logs = [p.read_text(errors="replace") for p in sorted((runs["base"] / mode / "pods").glob("*.log"))]
    assert logs and not any("invalid literal for int()" in text for text in logs)
    if mode == "inprocess-ft":
        exits = [x for text in logs for x in text.splitlines() if x.startswith("[train] rank ") and " exiting " in x]
        stopped = [x for x in exits if "(peer_lost): in-process layer stopped" in x]
        assert len(stopped) == 1 and not any("tearing down" in x for x in stopped), exits
        assert len([x for x in exits if "(peer_lost): DistNetworkError" in x]) == 1, exits


@pytest.mark.parametrize("mode", list(LAYERS))
def test_an_evicted_pod_s_ranks_and_their_peers_save_the_step_and_stop(runs, mode):
    """evict@33:1: the evicted rank finishes its step, every rank saves that step to storage (the final save of
    training.resilience.sigterm, issue 47) and stops with 143; its peer in the pod that stays leaves as
    ``PeerTerminated`` after the same save, not as a lost peer. In every mode: the trainer's loop does it."""
    logs = [p.read_text(errors="replace") for p in sorted((runs["base"] / mode / "pods").glob("*.log"))]
    exits = [x for text in logs for x in text.splitlines() if x.startswith("[train] rank ") and " exiting " in x]
    final = re.compile(
        r"code 143 \(terminated\): (SIGTERM|1 rank\(s\) had a SIGTERM \(a drained node\)): stopped after step "
        r"(\d+) and its final save"
    )
    saved = sorted((m.group(1), int(m.group(2))) for x in exits if (m := final.search(x)))
    assert [who for who, _ in saved] == ["1 rank(s) had a SIGTERM (a drained node)", "SIGTERM"], exits
    assert saved[0][1] == saved[1][1] >= 33, exits
