"""The pieces every section shares: a strict, frozen model and a semantic-version parse."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def _semver(v: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+\.\d+\.\d+", v):
        raise ValueError(f"{v!r} is not a MAJOR.MINOR.PATCH version")
    return tuple(int(p) for p in v.split("."))
