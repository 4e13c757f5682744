"""The GPU quota check against moto's Service Quotas and EC2.

moto serves Service Quotas only for VPC quotas; the EC2 quotas the check reads are added to its
backend here (as AWS reports them: {"QuotaCode", "Value", ...}), so the adapter's requests and the
answers' parsing run through botocore and moto as on AWS. Without them moto answers
NoSuchResourceException, which is how the check meets an API it cannot read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.servicequotas.models import ServiceQuotasBackend

from fusionfleet.fleet.quotas import ON_DEMAND_QUOTA, SPOT_QUOTA, GpuFleet, ServiceQuotasCapacity
from tests.support.fakes import Clock

REGION = "us-east-1"


@pytest.fixture
def quotas(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, float]]:
    """The account's EC2 quotas, by code; a code left out is one moto cannot find."""
    values: dict[str, float] = {}
    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: ServiceQuotasBackend, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code == "ec2" and quota_code in values:
            return {"ServiceCode": "ec2", "QuotaCode": quota_code, "Value": values[quota_code], "Unit": "None"}
        return original(self, service_code, quota_code)

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        yield values


def capacity(fleet: GpuFleet, clock: Clock | None = None) -> ServiceQuotasCapacity:
    return ServiceQuotasCapacity(
        boto3.client("service-quotas", region_name=REGION),
        boto3.client("ec2", region_name=REGION),
        fleet,
        REGION,
        cache_s=300,
        clock=clock or Clock(),
    )


def test_a_quota_of_zero_refuses_with_the_quota_named(quotas: dict[str, float]) -> None:
    # GIVEN a new account: no On-Demand G and VT vCPUs
    quotas[ON_DEMAND_QUOTA] = 0.0
    # WHEN the slicer asks whether g5.xlarge hosts can start
    refusal = capacity(GpuFleet(("g5.xlarge",))).refusal()
    # THEN it is told no, with the size, the quota, its code and the region
    assert refusal is not None
    assert "g5.xlarge needs 4 vCPUs" in refusal
    assert "running On-Demand G and VT instances (L-DB2E81BA) is 0 vCPUs" in refusal and REGION in refusal


def test_a_quota_that_fits_one_host_accepts(quotas: dict[str, float]) -> None:
    quotas[ON_DEMAND_QUOTA] = 8.0
    assert capacity(GpuFleet(("g5.xlarge",))).refusal() is None


def test_a_quota_below_one_host_refuses(quotas: dict[str, float]) -> None:
    quotas[ON_DEMAND_QUOTA] = 2.0
    assert "needs 4 vCPUs" in (capacity(GpuFleet(("g5.xlarge",))).refusal() or "")


def test_a_fleet_with_spot_starts_when_either_market_has_room(quotas: dict[str, float]) -> None:
    quotas[ON_DEMAND_QUOTA] = 0.0
    quotas[SPOT_QUOTA] = 4.0
    assert capacity(GpuFleet(("g5.xlarge",), on_demand_percentage=50)).refusal() is None
    quotas[SPOT_QUOTA] = 0.0
    refusal = capacity(GpuFleet(("g5.xlarge",), on_demand_percentage=50)).refusal() or ""
    assert ON_DEMAND_QUOTA in refusal and SPOT_QUOTA in refusal
    # A Spot-only fleet reads only the Spot quota.
    quotas[SPOT_QUOTA] = 4.0
    assert capacity(GpuFleet(("g5.xlarge",), on_demand_percentage=0)).refusal() is None


def test_the_verdict_is_cached_for_minutes(quotas: dict[str, float]) -> None:
    # GIVEN a refusal
    quotas[ON_DEMAND_QUOTA] = 0.0
    clock = Clock()
    check = capacity(GpuFleet(("g5.xlarge",)), clock)
    assert check.refusal() is not None
    # WHEN the quota is raised
    quotas[ON_DEMAND_QUOTA] = 16.0
    # THEN the cached verdict holds for its five minutes, and the new quota counts after them
    clock.advance(299)
    assert check.refusal() is not None
    clock.advance(2)
    assert check.refusal() is None


def test_a_quota_that_cannot_be_read_blocks_nothing_and_is_logged(
    quotas: dict[str, float], caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN no EC2 quota the API can answer (moto's NoSuchResourceException: as good as a missing
    # permission or an outage)
    caplog.set_level(logging.WARNING)
    # WHEN the check runs
    refusal = capacity(GpuFleet(("g5.xlarge",))).refusal()
    # THEN the job goes, and the log says which quota was not read
    assert refusal is None
    assert f"GPU quota {ON_DEMAND_QUOTA} not read" in caplog.text


def test_an_unknown_instance_type_falls_back_to_refusing_only_a_zero_quota(
    quotas: dict[str, float], caplog: pytest.LogCaptureFixture
) -> None:
    quotas[ON_DEMAND_QUOTA] = 2.0
    assert capacity(GpuFleet(("g99.huge",))).refusal() is None
    assert "GPU instance sizes not read" in caplog.text
    quotas[ON_DEMAND_QUOTA] = 0.0
    assert "needs 1 vCPUs" in (capacity(GpuFleet(("g99.huge",))).refusal() or "")
