"""Whether the GPU fleet can start a single host, read from the account's Service Quotas.

A new AWS account often has a vCPU quota of 0 for G and VT instances: the capacity provider then
never starts a host and every job waits in the queues until its timeout, hours later. The slicer asks
first (the answer cached for minutes) and refuses the job with a notice that says exactly that. A
quota it cannot read (no permission, an API error) never blocks a job: it is logged and the job goes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from fusionfleet.environment import settings

logger = logging.getLogger(__name__)

# Service Quotas codes (service "ec2"), both counted in vCPUs.
ON_DEMAND_QUOTA = "L-DB2E81BA"  # Running On-Demand G and VT instances
SPOT_QUOTA = "L-3819A6DF"  # All G and VT Spot Instance Requests


@dataclass(frozen=True)
class GpuFleet:
    """What the render hosts' Auto Scaling group may launch (template: GpuInstanceType(s), GpuOnDemandPercentage)."""

    instance_types: tuple[str, ...]
    on_demand_percentage: int = settings.GPU_ON_DEMAND_PERCENTAGE.default  # the rest is Spot

    @property
    def uses_on_demand(self) -> bool:
        return self.on_demand_percentage > 0

    @property
    def uses_spot(self) -> bool:
        return self.on_demand_percentage < 100


@dataclass(frozen=True)
class QuotaReading:
    """What the account allows, in vCPUs; None where it could not be read."""

    on_demand_vcpus: float | None
    spot_vcpus: float | None
    instance_vcpus: int | None  # the smallest of the fleet's instance types


def fleet_refusal(fleet: GpuFleet, reading: QuotaReading, region: str) -> str | None:
    """Why the fleet cannot start one GPU host, or None when it can or when anything is unknown."""
    need = reading.instance_vcpus or 1  # unknown size: only a quota of 0 is certainly too small
    markets = []
    if fleet.uses_on_demand:
        markets.append(("running On-Demand G and VT instances", ON_DEMAND_QUOTA, reading.on_demand_vcpus))
    if fleet.uses_spot:
        markets.append(("G and VT Spot Instance Requests", SPOT_QUOTA, reading.spot_vcpus))
    if not markets or any(value is None or value >= need for _name, _code, value in markets):
        return None
    types = " or ".join(fleet.instance_types)
    quotas = " and ".join(f"{name} ({code}) is {value:g} vCPUs" for name, code, value in markets)
    return (
        f"the GPU fleet cannot start a single instance: {types} needs {need} vCPUs and this account's "
        f"quota in {region} for {quotas}; nothing was read or rendered: ask for a quota increase in "
        "Service Quotas, then upload the manifest again"
    )


class GpuCapacity(Protocol):
    def refusal(self) -> str | None:
        """Why no job can render now for want of GPU quota, or None."""


class ServiceQuotasCapacity:
    """GpuCapacity from Service Quotas (GetServiceQuota) and EC2 (DescribeInstanceTypes), cached."""

    def __init__(
        self,
        quotas: Any,
        ec2: Any,
        fleet: GpuFleet,
        region: str,
        cache_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._quotas = quotas
        self._ec2 = ec2
        self._fleet = fleet
        self._region = region
        self._cache_s = cache_s
        self._clock = clock
        self._cached: tuple[float, str | None] | None = None  # (when read, verdict)

    def refusal(self) -> str | None:
        now = self._clock()
        if self._cached is not None and now - self._cached[0] < self._cache_s:
            return self._cached[1]
        verdict = fleet_refusal(self._fleet, self.read(), self._region)
        self._cached = (now, verdict)
        return verdict

    def read(self) -> QuotaReading:
        return QuotaReading(
            on_demand_vcpus=self._quota(ON_DEMAND_QUOTA) if self._fleet.uses_on_demand else None,
            spot_vcpus=self._quota(SPOT_QUOTA) if self._fleet.uses_spot else None,
            instance_vcpus=self._instance_vcpus(),
        )

    def _quota(self, code: str) -> float | None:
        try:
            try:
                response = self._quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)
            except self._quotas.exceptions.NoSuchResourceException:
                # No value applied to this account: the default is what holds.
                response = self._quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)
            return float(response["Quota"]["Value"])
        except Exception as error:  # any failure to read: never a reason to refuse a job
            logger.warning("GPU quota %s not read (%s); jobs are accepted without the check", code, error)
            return None

    def _instance_vcpus(self) -> int | None:
        try:
            response = self._ec2.describe_instance_types(InstanceTypes=list(self._fleet.instance_types))
            return min(int(item["VCpuInfo"]["DefaultVCpus"]) for item in response["InstanceTypes"])
        except Exception as error:  # as above: unknown size, only a quota of 0 refuses
            logger.warning("GPU instance sizes not read (%s); assuming one vCPU", error)
            return None
