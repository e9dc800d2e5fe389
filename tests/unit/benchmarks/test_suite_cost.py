"""The suite-cost table: busy time from /proc/stat, summed per file; and a real serial pytest run through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.suite_cost import FileCost, busy_cpu_s, by_file, table

REPO = Path(__file__).resolve().parents[3]


def test_busy_time_counts_user_nice_system_irq_and_softirq_but_not_idle_or_iowait() -> None:
    stat = "cpu  100 20 30 1000 5 7 3 0 0 0\ncpu0 50 10 15 500 2 3 1 0 0 0\n"
    assert busy_cpu_s(stat) == 160 / os.sysconf("SC_CLK_TCK")  # 100 + 20 + 30 + 7 + 3 ticks


def test_rows_are_summed_per_file_the_most_cpu_first() -> None:
    rows = [
        ("tests/a.py::test_x", 1.0, 0.5),
        ("tests/b.py::test_y[1]", 2.0, 3.0),
        ("tests/a.py::TestK::test_z", 0.5, 0.25),
        ("tests/b.py::test_y[2]", 1.0, 1.0),
        ("tests/c.py::test_w", 0.25, 0.75),
    ]
    assert by_file(rows) == [
        FileCost("tests/b.py", 4.0, 3.0, 2),
        FileCost("tests/a.py", 0.75, 1.5, 2),
        FileCost("tests/c.py", 0.75, 0.25, 1),
    ]


def test_the_table_shows_the_top_files_then_the_rest_and_the_totals() -> None:
    costs = [FileCost("tests/b.py", 4.0, 3.0, 2), FileCost("tests/a.py", 0.75, 1.5, 2), FileCost("c.py", 0.75, 0.25, 1)]
    assert table(costs, top=1).splitlines() == [
        "| test file | tests | busy CPU-s | wall s |",
        "|---|---|---|---|",
        "| tests/b.py | 2 | 4.0 | 3.0 |",
        "| the other 2 files | 3 | 1.5 | 1.8 |",
        "| all 3 files | 5 | 5.5 | 4.8 |",
    ]


def test_a_serial_pytest_run_leaves_one_row_per_test(tmp_path: Path) -> None:
    """A file of its own (outside the repository: no conftest, no torch to import; ``--rootdir`` roots its node ids
    in its directory, else pytest roots them where that and the repository meet), with a parametrized test and a
    class: each test, parameter and method is a row, and the file is one line of the table."""
    target = tmp_path / "test_sample.py"
    target.write_text(
        "import pytest\n\n"
        "def test_plain():\n    assert sum(range(1000)) == 499500\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_param(n):\n    assert n\n\n"
        "class TestKind:\n    def test_method(self):\n        assert type(self).__name__ == 'TestKind'\n"
    )
    rows_file = tmp_path / "rows.json"
    args = ["--out", str(rows_file), str(target), "--rootdir", str(tmp_path), "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.suite_cost", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(rows_file.read_text())
    assert sorted(nodeid for nodeid, _, _ in rows) == [
        "test_sample.py::TestKind::test_method",
        "test_sample.py::test_param[1]",
        "test_sample.py::test_param[2]",
        "test_sample.py::test_plain",
    ]
    assert all(wall >= 0 and cpu >= 0 for _, wall, cpu in rows)
    assert "| test_sample.py | 4 |" in proc.stdout
