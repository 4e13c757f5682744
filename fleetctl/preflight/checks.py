"""The preflight's checks against an account: GPU quota, service-linked roles, the subnets' reach.

Each check returns findings: OK (what holds), FIXED (what it did: a service-linked role created) or
FIX (what the operator must do before a deploy can work). Parameters come from the flags, else from
the stack when it exists (an update), else from the template's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetctl.preflight.network import subnet_reach
from fusionfleet.fleet.quotas import GpuFleet, ServiceQuotasCapacity, fleet_refusal
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE

OK, FIXED, FIX = "OK", "FIXED", "FIX"
CHECK = "CHECK"  # what no call here tells, to verify by hand (as account.py's)
# Where the template's GpuHourlyPrice default is the price: g5.xlarge On-Demand in us-east-1 (fusionfleet.jobs.cost).
DEFAULT_PRICE_OF = ("us-east-1", "g5.xlarge")

# Service-linked roles a first deploy needs: ECS (the cluster, capacity providers; its creation races
# the first cluster on a new account), Auto Scaling (the GPU group), Application Auto Scaling (the
# services' scaling), and EC2 Spot when any host is Spot.
SERVICE_LINKED_ROLES = {
    "ecs.amazonaws.com": "AWSServiceRoleForECS",
    "autoscaling.amazonaws.com": "AWSServiceRoleForAutoScaling",
    "ecs.application-autoscaling.amazonaws.com": "AWSServiceRoleForApplicationAutoScaling_ECSService",
}
SPOT_ROLE = ("spot.amazonaws.com", "AWSServiceRoleForEC2Spot")


@dataclass(frozen=True)
class Finding:
    status: str  # OK | FIXED | FIX | CHECK (account.py: what no API tells, to verify by hand)
    check: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<6} {self.check:<14} {self.detail}"


@dataclass(frozen=True)
class DeployPlan:
    """The parameters the checks need (template names in comments)."""

    instance_types: tuple[str, ...]  # GpuInstanceType, GpuInstanceTypeAlternative
    on_demand_percentage: int  # GpuOnDemandPercentage
    subnets: tuple[str, ...]  # SubnetIds
    assign_public_ip: bool  # AssignPublicIp
    vpc_endpoints: bool  # CreateVpcEndpoints
    gpu_max_instances: int = 4  # GpuMaxInstances
    slicer_reserved_concurrency: int | None = None  # SlicerReservedConcurrency ("" is None)
    dashboard_distribution: bool = True  # CreateDashboardDistribution
    route_tables: tuple[str, ...] = ()  # RouteTableIds
    gpu_hourly_price: float | None = None  # GpuHourlyPrice (None: the template's default)

    @classmethod
    def from_parameters(cls, values: Mapping[str, str]) -> DeployPlan:
        types = [values.get("GpuInstanceType") or "g5.xlarge", values.get("GpuInstanceTypeAlternative") or ""]
        reserved = values.get("SlicerReservedConcurrency") or ""
        return cls(
            instance_types=tuple(t for t in types if t),
            on_demand_percentage=int(values.get("GpuOnDemandPercentage") or 100),
            subnets=_listed(values.get("SubnetIds")),
            assign_public_ip=(values.get("AssignPublicIp") or "ENABLED") == "ENABLED",
            vpc_endpoints=(values.get("CreateVpcEndpoints") or "false") == "true",
            gpu_max_instances=int(values.get("GpuMaxInstances") or 4),
            slicer_reserved_concurrency=int(reserved) if reserved else None,
            dashboard_distribution=(values.get("CreateDashboardDistribution") or "true") == "true",
            route_tables=_listed(values.get("RouteTableIds")),
            gpu_hourly_price=float(values["GpuHourlyPrice"]) if values.get("GpuHourlyPrice") else None,
        )


def _listed(value: str | None) -> tuple[str, ...]:
    return tuple(item.strip() for item in (value or "").split(",") if item.strip())


def stack_parameters(cloudformation: Any, stack: str) -> dict[str, str]:
    """The parameters of a deployed stack, or {} when there is none yet (a first deploy)."""
    try:
        described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    except cloudformation.exceptions.ClientError as error:
        if "does not exist" in str(error):
            return {}
        raise
    return {p["ParameterKey"]: str(p.get("ParameterValue", "")) for p in described.get("Parameters", [])}


def check_quota(quotas: Any, ec2: Any, plan: DeployPlan, region: str) -> list[Finding]:
    fleet = GpuFleet(plan.instance_types, plan.on_demand_percentage)
    reading = ServiceQuotasCapacity(quotas, ec2, fleet, region, cache_s=0).read()
    refusal = fleet_refusal(fleet, reading, region)
    if refusal is not None:
        return [Finding(FIX, "gpu quota", refusal.replace("; nothing was read or rendered", ""))]
    values = [("On-Demand", reading.on_demand_vcpus), ("Spot", reading.spot_vcpus)]
    read = [f"{name} {value:g} vCPUs" for name, value in values if value is not None]
    unknown = [name for name, value in values if value is None and name == "On-Demand" and fleet.uses_on_demand]
    if unknown or (fleet.uses_spot and reading.spot_vcpus is None):
        return [Finding(FIX, "gpu quota", "could not read the G and VT vCPU quota (servicequotas:GetServiceQuota)")]
    need = reading.instance_vcpus
    return [Finding(OK, "gpu quota", f"{' and '.join(read)} for G and VT; {'/'.join(plan.instance_types)} needs "
                                     f"{need if need is not None else '?'} per host")]  # fmt: skip


def ensure_service_linked_roles(iam: Any, plan: DeployPlan) -> list[Finding]:
    wanted = dict(SERVICE_LINKED_ROLES)
    if plan.on_demand_percentage < 100:
        wanted[SPOT_ROLE[0]] = SPOT_ROLE[1]
    findings = []
    for service, role in wanted.items():
        try:
            iam.get_role(RoleName=role)
            findings.append(Finding(OK, "linked role", f"{role} exists"))
            continue
        except iam.exceptions.NoSuchEntityException:
            pass
        try:
            iam.create_service_linked_role(AWSServiceName=service)
            findings.append(Finding(FIXED, "linked role", f"created {role} ({service})"))
        except iam.exceptions.InvalidInputException as error:
            if "has been taken" in str(error):  # created meanwhile
                findings.append(Finding(OK, "linked role", f"{role} exists"))
            else:
                findings.append(Finding(FIX, "linked role", f"{role} could not be created: {error}"))
    return findings


def check_subnets(ec2: Any, plan: DeployPlan, region: str) -> list[Finding]:
    if not plan.subnets:
        return [Finding(FIX, "subnets", "no SubnetIds: name the subnets of the GPU hosts and merge tasks")]
    described = ec2.describe_subnets(SubnetIds=list(plan.subnets))["Subnets"]
    findings = []
    for subnet in described:
        vpc = subnet["VpcId"]
        endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["VpcEndpoints"]
        if plan.vpc_endpoints:
            findings.append(Finding(OK, "subnets", f"{subnet['SubnetId']}: the stack creates VPC endpoints"))
            continue
        reach = subnet_reach(subnet["SubnetId"], _routes(ec2, subnet["SubnetId"], vpc), endpoints, region,
                             plan.assign_public_ip)  # fmt: skip
        findings.append(Finding(OK if reach.ok else FIX, "subnets", f"{reach.subnet} ({vpc}): {reach.how}"))
    return findings


def _routes(ec2: Any, subnet: str, vpc: str) -> list[dict[str, Any]]:
    """The subnet's route table's routes; the VPC's main table when the subnet has none of its own."""
    tables = ec2.describe_route_tables(Filters=[{"Name": "association.subnet-id", "Values": [subnet]}])["RouteTables"]
    if not tables:
        tables = ec2.describe_route_tables(
            Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "association.main", "Values": ["true"]}]
        )["RouteTables"]
    return [route for table in tables for route in table.get("Routes", [])]


def check_price(plan: DeployPlan, region: str) -> list[Finding]:
    """GpuHourlyPrice against the one region and type its default is the price of (issue 45: every job's
    cost, `fusionfleet estimate` and the tenants' bills are priced with it). Pure."""
    price = DEFAULT_GPU_HOURLY_PRICE if plan.gpu_hourly_price is None else plan.gpu_hourly_price
    kind = plan.instance_types[0] if plan.instance_types else DEFAULT_PRICE_OF[1]
    if price != DEFAULT_GPU_HOURLY_PRICE or (region, kind) == DEFAULT_PRICE_OF:
        return [Finding(OK, "gpu price", f"GpuHourlyPrice {price:g} $/GPU-hour for {kind} On-Demand in {region}")]
    return [Finding(CHECK, "gpu price",
                    f"GpuHourlyPrice is the template's default, {price:g}: {DEFAULT_PRICE_OF[1]} On-Demand in "
                    f"{DEFAULT_PRICE_OF[0]}; deploy with GpuHourlyPrice=<{kind} On-Demand in {region}> "
                    "(docs/aws.md, the first deploy, step 7), or every job's cost is priced wrong")]  # fmt: skip


def preflight(clients: Mapping[str, Any], plan: DeployPlan, region: str) -> list[Finding]:
    """Every check, in the order a deploy meets them."""
    return [
        *check_quota(clients["service-quotas"], clients["ec2"], plan, region),
        *ensure_service_linked_roles(clients["iam"], plan),
        *check_subnets(clients["ec2"], plan, region),
        *check_price(plan, region),
    ]
