"""training.common.arguments: argparse types that keep a rejected value, and one message naming every bad value."""

from __future__ import annotations

import argparse

import pytest

from training.common.arguments import (
    Rejected,
    good,
    listed,
    message,
    nested,
    number,
    one_of,
    parse,
    port,
    problem,
    shown,
)


@pytest.mark.parametrize(
    ("convert", "text", "expected"),
    [
        (number(int, at_least=1), "3", 3),
        (number(int, at_least=1), "0", Rejected("0", "a whole number >= 1")),
        (number(int, at_least=1), "-3", Rejected("-3", "a whole number >= 1")),
        (number(int, at_least=1), "2.5", Rejected("2.5", "a whole number >= 1")),
        (number(int, at_least=1), "x", Rejected("x", "a whole number >= 1")),
        (number(float, at_least=0), "0", 0.0),
        (number(float, at_least=0), "-0.5", Rejected("-0.5", "a number >= 0")),
        (number(float, at_least=0), "nan", Rejected("nan", "a number >= 0")),
        (number(float, above=0), "0", Rejected("0", "a number > 0")),
        (number(float, above=0), "inf", Rejected("inf", "a number > 0")),
        (number(int, at_most=5), "6", Rejected("6", "a whole number <= 5")),
        (port, "29500", 29500),
        (port, "80", Rejected("80", "a whole number from 1024 to 65535")),
        (port, "70000", Rejected("70000", "a whole number from 1024 to 65535")),
        (one_of(["a", "b"]), "b", "b"),
        (one_of(["a", "b"]), "c", Rejected("c", "one of a, b")),
        (listed(one_of(["a", "b"])), "b, a", ["b", "a"]),
        (listed(one_of(["a", "b"])), "a,c", Rejected("a,c", "comma-separated, each one of a, b")),
        (listed(number(int, at_least=1)), "1,2", [1, 2]),
        (listed(number(int, at_least=1)), ",", Rejected(",", "comma-separated, each a whole number >= 1")),
    ],
)
def test_a_type_returns_the_value_or_what_the_flag_allows(convert, text, expected) -> None:
    assert convert(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [("-3", "-3"), ("x", '"x"'), (5, "5"), (Rejected("2.5", ""), "2.5"), ("a b", '"a b"')]
)
def test_values_are_shown_bare_when_numbers_and_quoted_otherwise(value, expected) -> None:
    assert shown(value) == expected
    assert problem("--n", "allowed", value) == f"--n: allowed (got {expected})"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="demo")
    p.add_argument("--steps", "-s", type=number(int, at_least=1), default=None)
    p.add_argument("--mode", type=one_of(["fast", "slow"]), default="fast")
    p.add_argument("--budget", type=number(int, at_least=0), action="append", default=[])
    return p


def test_every_rejected_value_and_every_cross_check_is_in_one_message(capsys) -> None:
    argv = ["-s", "0", "--mode", "warp", "--budget", "2", "--budget", "-1"]
    with pytest.raises(SystemExit) as exc:
        parse(_parser(), argv, lambda args: [] if good(args.steps) else ["--steps: needed by the check"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        "error: invalid arguments (demo):\n"
        "  - --steps: a whole number >= 1 (got 0)\n"
        '  - --mode: one of fast, slow (got "warp")\n'
        "  - --budget: a whole number >= 0 (got -1)\n"
        "  - --steps: needed by the check\n"
    )


def test_good_arguments_pass_through() -> None:
    args = parse(_parser(), ["--steps", "4", "--budget", "0"], lambda args: [])
    assert (args.steps, args.mode, args.budget) == (4, "fast", [0])
    assert good(args.steps) and not good(None) and not good(Rejected("x", ""))


def test_a_multi_line_error_stays_one_item_of_the_message() -> None:
    text = "invalid configuration (p.yaml):\n  - a: bad (got 1)"
    assert message("demo", ["--x: y", f"--config: {nested(text)}"]) == (
        "error: invalid arguments (demo):\n"
        "  - --x: y\n"
        "  - --config: invalid configuration (p.yaml):\n"
        "      - a: bad (got 1)\n"
    )
