"""What setup imports to write the suite's bytecode once (scripts/warm_bytecode.py)."""

from __future__ import annotations

from scripts.warm_bytecode import main, modules


def test_the_platform_part_imports_every_public_module_of_the_platform_packages() -> None:
    names = modules("platform")
    assert names[:3] == ["stacks", "charts", "platform_config"]
    assert {
        "stacks.addons",
        "stacks.gpu_user_data",
        "charts.main",
        "charts.training_job",
        "platform_config.schema",
    } <= set(names)
    assert not [n for n in names if n.rsplit(".", 1)[-1].startswith("_")]
    assert {"cfnlint.api", "pytest"} <= set(names) and "torch._dynamo" not in names


def test_the_training_part_imports_what_a_worker_template_imports() -> None:
    names = modules("training")
    assert {"training.train", "torch._dynamo", "training.resilience.ft_launcher"} <= set(names)
    assert "torch.distributed.checkpoint" in names and "stacks" not in names


def test_an_unknown_part_is_a_usage_error(capsys) -> None:
    assert main(["everything"]) == 2 and main([]) == 2
    assert "usage: python -m scripts.warm_bytecode {platform,training}" in capsys.readouterr().err
