import cdk8s

from charts.dataset_job import DatasetJob, dataset_dir, prepare_data_args
from tests.unit.charts.conftest import IMAGE, make_cfg


def test_dataset_job_writes_shards_on_fsx(cfg):
    chart = cdk8s.Testing.chart()
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
