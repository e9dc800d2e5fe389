"""Checkpoints outlive the stack: the run directory exported to a retained, versioned bucket."""

from __future__ import annotations

import pytest

from platform_config import load_config
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import only, resources


def test_checkpoints_export_to_a_retained_bucket(any_env: Synthesized) -> None:
    """The run directory is linked to S3 with automatic export of new and changed files; the bucket and the file
    system are retained on delete and on replacement, so no checkpoint goes with the stack."""
    tpl = any_env.template_json(any_env.platform.storage)
    fs_id, fs = next(iter(resources(tpl, "AWS::FSx::FileSystem").items()))
    assert fs["DeletionPolicy"] == fs["UpdateReplacePolicy"] == "Retain"
    bucket_id, bucket = next(iter(resources(tpl, "AWS::S3::Bucket").items()))
    assert bucket["DeletionPolicy"] == bucket["UpdateReplacePolicy"] == "Retain"
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    dra = only(tpl, "AWS::FSx::DataRepositoryAssociation")["Properties"]
    assert dra["FileSystemId"] == {"Ref": fs_id}
    assert dra["FileSystemPath"] == any_env.cfg.storage.export_path == "/runs"
    assert dra["DataRepositoryPath"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, "/runs/"]]}
    assert dra["S3"] == {"AutoExportPolicy": {"Events": ["NEW", "CHANGED"]}}
    assert dra["BatchImportMetaDataOnCreate"] is True
    assert "CheckpointBucket" in tpl["Outputs"]


@pytest.mark.parametrize("env", ["default", "prod"])
def test_every_run_directory_is_under_the_exported_path(env: str) -> None:
    from charts.names import run_dir
    from platform_config import RecoveryMode

    cfg = load_config(env=env)
    for mode in RecoveryMode:
        assert run_dir(cfg, mode).startswith(f"{cfg.storage.mount_path}{cfg.storage.export_path}/")
