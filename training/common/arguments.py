"""Command-line arguments checked whole before anything starts: every bad value in one message, exit status 2.

argparse stops at the first value its ``type`` rejects; the types here keep a rejected value as :class:`Rejected`
instead, so that :func:`exit_if_bad` names all of them, with the cross-checks of the command (``problems``), in the
style of the configuration's errors::

    error: invalid arguments (training.local):
      - --steps: a whole number >= 1 (got -3)
      - --faults 'bogus@x': kind must be one of exception, hang, sigkill, oom, comm (got "bogus")

Status 2 is argparse's own for a usage error (and ``ExitCode.CONFIG``): never a code that fails or restarts a Job.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: The exit status of a bad command line.
USAGE_ERROR = 2


@dataclass(frozen=True)
class Rejected:
    """A flag's value its type did not accept: ``text`` as typed, ``allowed`` what the flag takes."""

    text: str
    allowed: str


def shown(value: Any) -> str:
    """A value as the messages quote it: numbers bare, text in double quotes."""
    if isinstance(value, Rejected):
        value = value.text
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return json.dumps(value)
        return value
    return json.dumps(value, default=str)


def problem(flag: str, allowed: str, got: Any) -> str:
    """One line of the message: ``FLAG: what is allowed (got VALUE)``."""
    return f"{flag}: {allowed} (got {shown(got)})"


def number(
    kind: type[int] | type[float] = int,
    *,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
) -> Callable[[str], Any]:
    """An argparse ``type``: ``kind`` within the bounds, else a :class:`Rejected` saying what is allowed."""
    allowed = "a whole number" if kind is int else "a number"
    if at_least is not None and at_most is not None:
        allowed += f" from {at_least:g} to {at_most:g}"
    else:
        allowed += f" >= {at_least:g}" if at_least is not None else ""
        allowed += f" <= {at_most:g}" if at_most is not None else ""
    allowed += f" > {above:g}" if above is not None else ""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            return Rejected(text, allowed)
        if isinstance(value, float) and not math.isfinite(value):
            return Rejected(text, allowed)
        low_ok = (at_least is None or value >= at_least) and (above is None or value > above)
        return value if low_ok and (at_most is None or value <= at_most) else Rejected(text, allowed)

    convert.__name__ = kind.__name__
    convert.allowed = allowed  # type: ignore[attr-defined]
    return convert


def one_of(choices: Iterable[str]) -> Callable[[str], str | Rejected]:
    """An argparse ``type``: one of ``choices``, else a :class:`Rejected` listing them."""
    names = tuple(choices)
    allowed = f"one of {', '.join(names)}"

    def convert(text: str) -> str | Rejected:
        return text if text in names else Rejected(text, allowed)

    convert.allowed = allowed  # type: ignore[attr-defined]
    return convert


def choices(names: Iterable[str]) -> dict[str, Any]:
    """``add_argument`` keywords for one of ``names``: :func:`one_of` as the type, the names in the usage line."""
    names = tuple(names)
    return {"type": one_of(names), "metavar": "{" + ",".join(names) + "}"}


def listed(convert: Callable[[str], Any]) -> Callable[[str], list[Any] | Rejected]:
    """An argparse ``type``: one or more comma-separated values of ``convert`` (:func:`number`, :func:`one_of`), else
    a :class:`Rejected` saying what each must be."""
    allowed = f"comma-separated, each {convert.allowed}"  # type: ignore[attr-defined]

    def convert_all(text: str) -> list[Any] | Rejected:
        items = [convert(item.strip()) for item in text.split(",") if item.strip()]
        if not items or any(isinstance(item, Rejected) for item in items):
            return Rejected(text, allowed)
        return items

    return convert_all


#: A TCP port a command listens on (unprivileged, as ``platform_config``'s port fields).
port = number(int, at_least=1024, at_most=65535)


def good(value: Any) -> bool:
    """The value was given and accepted (a cross-check looks only at those)."""
    return value is not None and not isinstance(value, Rejected)


def rejected(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """A line per rejected value of ``args``, in the parser's order of flags."""
    lines = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        flag = max(action.option_strings, key=len) if action.option_strings else action.dest
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Rejected):
                lines.append(problem(flag, item.allowed, item))
    return lines


def nested(text: str) -> str:
    """A multi-line text (a configuration error) as one item of the message: its later lines indented under it."""
    return text.replace("\n", "\n    ")


def message(prog: str, lines: list[str]) -> str:
    """The whole message, in the configuration errors' style."""
    return f"error: invalid arguments ({prog}):\n" + "".join(f"  - {line}\n" for line in lines)


def exit_if_bad(parser: argparse.ArgumentParser, args: argparse.Namespace, problems: Iterable[str] = ()) -> None:
    """End the command with :data:`USAGE_ERROR` and one message if any value was rejected or ``problems`` has any."""
    lines = rejected(parser, args) + list(problems)
    if lines:
        parser.exit(USAGE_ERROR, message(parser.prog, lines))


def parse(
    parser: argparse.ArgumentParser,
    argv: list[str] | None,
    check: Callable[[argparse.Namespace], Iterable[str]] | None = None,
) -> argparse.Namespace:
    """``parser.parse_args(argv)``, then :func:`exit_if_bad` with the command's cross-checks ``check`` (which see
    rejected values too: :func:`good` tells them apart)."""
    args = parser.parse_args(argv)
    exit_if_bad(parser, args, check(args) if check else ())
    return args
