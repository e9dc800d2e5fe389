"""Where the stack is deployed (``aws``)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from platform_config.schema.base import _Strict


class AwsConfig(_Strict):
    """Where the stack is deployed."""

    account: str | None = Field(
        default=None, description="12-digit account id; None = the CLI's default account at deploy time."
    )
    region: str = "us-east-1"
    availability_zone: str = Field(
        default="us-east-1a", description="AZ that holds the GPU capacity; GPU nodes and FSx live here."
    )

    @field_validator("account")
    @classmethod
    def _account(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"\d{12}", v):
            raise ValueError("must be a 12-digit AWS account id or null")
        return v

    @model_validator(mode="after")
    def _az_in_region(self) -> AwsConfig:
        if not self.availability_zone.startswith(self.region) or len(self.availability_zone) != len(self.region) + 1:
            raise ValueError(
                f"availability_zone {self.availability_zone!r} is not an AZ of region {self.region!r} "
                f"(expected e.g. {self.region}a)"
            )
        return self
