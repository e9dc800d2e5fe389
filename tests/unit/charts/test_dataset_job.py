from charts.dataset_job import DatasetJob, prepare_data_args, resource_quantities
from charts.names import dataset_dir, with_dataset_dir
from platform_config.instance_types import system_instance_type
from tests.unit.charts.conftest import IMAGE, bare_chart, make_cfg


def synth(cfg) -> dict:
    chart = bare_chart()
    DatasetJob(chart, "d", cfg, image=IMAGE)
    (job,) = chart.to_json()
    return job


def test_dataset_job_writes_shards_on_fsx(cfg):
    chart = bare_chart()
    DatasetJob(chart, "d", cfg, image=IMAGE)
    (job,) = chart.to_json()
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == prepare_data_args(cfg)
    assert c["command"][:3] == ["python", "-m", "training.data.prepare"]
    out = c["command"][c["command"].index("--out") + 1]
    assert out.startswith(f"{cfg.storage.mount_path}/data/")
    assert {"name": "fsx", "mountPath": cfg.storage.mount_path} in c["volumeMounts"]
    assert pod["restartPolicy"] == "Never"
    assert job["spec"]["ttlSecondsAfterFinished"] == cfg.job.ttl_seconds_after_finished


def test_configured_data_dir_wins():
    cfg = make_cfg(train={"data_dir": "/checkpoints/data/my-corpus"})
    assert dataset_dir(cfg) == "/checkpoints/data/my-corpus"


def test_arguments_are_ones_prepare_data_accepts():
    from training.data.prepare import parse_args

    for cfg in (make_cfg(), make_cfg(train={"corpus_source": "/checkpoints/raw/c4"})):
        args = parse_args(prepare_data_args(cfg)[3:])
        assert str(args.out) == dataset_dir(cfg)
        assert (args.source, args.generate) in ((["/checkpoints/raw/c4"], None), (None, 64.0))


def test_an_hf_checkpoint_brings_its_tokenizer_and_its_own_data_dir():
    cfg = make_cfg(model={"hf_checkpoint": "/checkpoints/models/Llama-3.1-8B"})
    from training.data.prepare import parse_args

    args = parse_args(prepare_data_args(cfg)[3:])
    assert str(args.tokenizer) == "/checkpoints/models/Llama-3.1-8B"
    assert dataset_dir(cfg) == f"{cfg.storage.mount_path}/data/hf-Llama-3.1-8B-seq{cfg.train.seq_len}"
    assert dataset_dir(make_cfg()) == f"{cfg.storage.mount_path}/data/{cfg.model.size}-seq{cfg.train.seq_len}"
    assert parse_args(prepare_data_args(make_cfg())[3:]).tokenizer is None


def test_runs_on_the_system_nodes_sized_to_fit_them(cfg):
    job = synth(cfg)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == cfg.cluster.system_node_labels == {"node-group": "system"}
    assert "tolerations" not in pod  # never on the tainted GPU nodes
    (c,) = pod["containers"]
    assert c["resources"]["requests"] == c["resources"]["limits"] == {"cpu": "2000m", "memory": "8Gi"}
    node = system_instance_type(cfg.cluster.system_node_instance_type)
    assert (cfg.dataset_prep.cpu, cfg.dataset_prep.memory_gib) == (2.0, 8)
    assert cfg.dataset_prep.cpu <= node.vcpus / 2 and cfg.dataset_prep.memory_gib <= node.memory_gib / 2


def test_active_deadline_bounds_the_job(cfg):
    assert synth(cfg)["spec"]["activeDeadlineSeconds"] == cfg.dataset_prep.active_deadline_seconds == 7200
    assert synth(make_cfg(dataset_prep={"active_deadline_seconds": 600}))["spec"]["activeDeadlineSeconds"] == 600


def test_requests_follow_the_config():
    cfg = make_cfg(dataset_prep={"cpu": 1.5, "memory_gib": 4})
    assert resource_quantities(cfg) == {"cpu": "1500m", "memory": "4Gi"}


def test_training_reads_the_jobs_output_by_default(cfg):
    assert cfg.train.data_dir is None
    assert with_dataset_dir(cfg).train.data_dir == dataset_dir(cfg) == f"/checkpoints/data/tiny-seq{cfg.train.seq_len}"
    explicit = make_cfg(train={"data_dir": "/checkpoints/data/mine"})
    assert with_dataset_dir(explicit) is explicit
