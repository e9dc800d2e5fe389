"""The VPC (``network``): a new one, or an existing one imported by id."""

from __future__ import annotations

from pydantic import Field, model_validator

from platform_config.schema.base import _Strict


class NetworkConfig(_Strict):
    """Either a new VPC (``vpc_id`` unset) or an existing one imported by id (no lookups)."""

    vpc_id: str | None = None
    vpc_cidr: str = "10.0.0.0/16"
    #: Existing private subnets: id -> AZ. Required with ``vpc_id``; no synth-time lookups.
    private_subnets: dict[str, str] = Field(default_factory=dict)
    #: Route-table id per existing subnet id (optional; CDK warns without it).
    route_tables: dict[str, str] = Field(default_factory=dict)
    #: The subnet (one of ``private_subnets``) for GPU nodes and FSx; must be in ``aws.availability_zone``.
    gpu_subnet_id: str | None = None
    nat_gateways: int = Field(default=1, ge=1, le=3)

    @model_validator(mode="after")
    def _existing(self) -> NetworkConfig:
        if self.vpc_id is None:
            if self.private_subnets or self.gpu_subnet_id:
                raise ValueError("private_subnets/gpu_subnet_id need vpc_id (an existing VPC)")
            return self
        if not self.private_subnets:
            raise ValueError("vpc_id is set, so private_subnets (subnet id -> AZ) is required")
        if self.gpu_subnet_id not in self.private_subnets:
            raise ValueError(
                f"gpu_subnet_id {self.gpu_subnet_id!r} must be one of private_subnets "
                f"({', '.join(self.private_subnets)})"
            )
        return self
