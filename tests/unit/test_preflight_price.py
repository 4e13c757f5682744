"""Issue 45: GpuHourlyPrice's default is one region's price (g5.xlarge On-Demand in us-east-1); preflight
says so wherever a stack would be priced with it elsewhere, or for another instance type."""

from __future__ import annotations

from fleetctl.preflight.checks import CHECK, OK, DeployPlan, check_price
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE


def plan(**values: str) -> DeployPlan:
    return DeployPlan.from_parameters(values)


def test_the_default_price_elsewhere_than_its_region_is_a_check_naming_what_to_set() -> None:
    # GIVEN a first deploy in eu-west-1 that leaves GpuHourlyPrice at the template's default
    # WHEN preflight judges the price
    [finding] = check_price(plan(), "eu-west-1")
    # THEN it asks for the region's price by name, and says whose the default is
    assert finding.status == CHECK and finding.check == "gpu price"
    assert f"default, {DEFAULT_GPU_HOURLY_PRICE:g}: g5.xlarge On-Demand in us-east-1" in finding.detail
    assert "GpuHourlyPrice=<g5.xlarge On-Demand in eu-west-1>" in finding.detail
    # AND so for another instance type in us-east-1
    assert check_price(plan(GpuInstanceType="g6.xlarge"), "us-east-1")[0].status == CHECK


def test_a_price_set_or_the_default_where_it_is_the_price_passes() -> None:
    assert check_price(plan(), "us-east-1")[0].status == OK
    [finding] = check_price(plan(GpuHourlyPrice="1.258"), "eu-west-1")
    assert finding.status == OK and "1.258" in finding.detail
