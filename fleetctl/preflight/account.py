"""The account conditions a first deploy meets beyond quota, roles and routes (issue 45): CloudFront,
Lambda's concurrency, the GPU quota for the whole fleet, the instance types in each subnet's zone, and
the VPC the stack's endpoints go into.

Each check reads only (List*, Describe*, Get*) and returns findings as checks.py's do: OK, FIX (the
deploy fails or the farm cannot run as deployed, with what to do) or CHECK (the API cannot tell; what
to verify by hand). An unreadable answer is a FIX naming the permission, as the quota check's is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from fleetctl.preflight.checks import FIX, OK, DeployPlan, Finding
from fleetctl.preflight.network import ENDPOINT_SERVICES
from fusionfleet.fleet.quotas import ON_DEMAND_QUOTA, SPOT_QUOTA

CHECK = "CHECK"
# Lambda's account quota of concurrent executions (Service Quotas, service "lambda").
LAMBDA_CONCURRENCY_QUOTA = "L-B99A9384"
# Lambda keeps this many executions unreserved: a reservation that leaves fewer fails the deploy.
LAMBDA_UNRESERVED_MINIMUM = 100
# Executions no event source caps: the API's requests and the watchdog's scheduled sweep, one each.
UNCAPPED_FUNCTIONS = 2
_MAXIMUM_CONCURRENCY = re.compile(r"^\s*MaximumConcurrency:\s*(?:(\d+)|!Ref\s+(\w+))\s*$", re.MULTILINE)

_FAILURES = (ClientError, BotoCoreError)
_FLAGS = {"enableDnsSupport": "--enable-dns-support", "enableDnsHostnames": "--enable-dns-hostnames"}


def _unreadable(check: str, action: str, error: Exception) -> Finding:
    return Finding(FIX, check, f"could not read ({action}): {error}; run preflight with credentials that may")


# ---------------------------------------------------------------- CloudFront


def check_cloudfront(cloudfront: Any, plan: DeployPlan, region: str) -> list[Finding]:
    """Whether the stack may create its tenant page's distribution.

    No API says whether an account is verified for CloudFront: an unverified one lists distributions
    and is refused only at CreateDistribution ("Your account must be verified before you can add new
    CloudFront resources"), minutes into the deploy, which then rolls back. What can be read: that
    these credentials may use CloudFront (ListDistributions), and that an account that already has a
    distribution may create one. An account with none is what new, perhaps unverified, accounts look
    like: CHECK, with the way around it."""
    if region.startswith(("us-gov-", "cn-")):
        return [Finding(OK, "cloudfront", f"none in {region}'s partition: the stack creates no distribution there")]
    if not plan.dashboard_distribution:
        return [Finding(OK, "cloudfront", "CreateDashboardDistribution=false: the stack creates no distribution")]
    try:
        listed = cloudfront.list_distributions(MaxItems="1")["DistributionList"]
    except _FAILURES as error:
        return [_unreadable("cloudfront", "cloudfront:ListDistributions", error)]
    if listed.get("Quantity", 0) > 0:
        return [Finding(OK, "cloudfront", "the account has distributions already: it may create the tenant page's")]
    return [
        Finding(
            CHECK, "cloudfront",
            "the account has no distribution yet, and no API tells whether it may create one (a new account may "
            "have to be verified first: CreateDistribution fails and the deploy rolls back); if the console's "
            "CloudFront > Create distribution is refused, ask AWS Support to verify the account, or deploy with "
            "CreateDashboardDistribution=false and DashboardOrigin set",
        )
    ]  # fmt: skip


# ---------------------------------------------------------------- Lambda


def event_source_concurrency(template: str, parameters: dict[str, str]) -> list[int]:
    """Each SQS event source's MaximumConcurrency in the template (a number or a parameter's Ref)."""
    caps = []
    for number, parameter in _MAXIMUM_CONCURRENCY.findall(template):
        caps.append(int(number) if number else int(parameters[parameter]))
    return caps


def template_defaults(template: str, names: Iterable[str]) -> dict[str, str]:
    """The Default of each named parameter, read from the template's text."""
    found = {}
    for name in names:
        match = re.search(rf"^  {name}:\n(?:    .*\n)*?    Default: \"?([^\"\n]*)\"?$", template, re.MULTILINE)
        if match:
            found[name] = match.group(1)
    return found


def check_lambda_concurrency(lambda_client: Any, plan: DeployPlan, caps: Sequence[int]) -> list[Finding]:
    """The account's concurrent executions against what the stack's functions may use at once.

    The event sources' caps (ScalingConfig.MaximumConcurrency) plus the API and the watchdog, which no
    source caps, is what a burst on every queue at once takes; a new account has 10. Fewer than that
    throttles (the API answers 429, SQS retries the rest); a SlicerReservedConcurrency that would leave
    fewer than Lambda's 100 unreserved executions fails the deploy."""
    try:
        settings = lambda_client.get_account_settings()
    except _FAILURES as error:
        return [_unreadable("lambda", "lambda:GetAccountSettings", error)]
    limit = int(settings["AccountLimit"]["ConcurrentExecutions"])
    unreserved = int(settings["AccountLimit"].get("UnreservedConcurrentExecutions", limit))
    need = sum(caps) + UNCAPPED_FUNCTIONS
    findings = []
    if limit < need:
        findings.append(Finding(
            FIX, "lambda",
            f"{limit} concurrent executions in this account; the stack's event sources may take {sum(caps)} at once "
            f"(MaximumConcurrency {' + '.join(map(str, caps))}) beside the API and the watchdog ({need}): a burst "
            f"throttles the API. Ask for at least {need} in Service Quotas (Lambda, {LAMBDA_CONCURRENCY_QUOTA}), or "
            f"lower SlicerMaxConcurrency",
        ))  # fmt: skip
    else:
        findings.append(Finding(OK, "lambda", f"{limit} concurrent executions, the stack may use {need} at once"))
    reserved = plan.slicer_reserved_concurrency
    if reserved is not None and unreserved - reserved < LAMBDA_UNRESERVED_MINIMUM:
        ask = reserved + LAMBDA_UNRESERVED_MINIMUM + limit - unreserved
        findings.append(Finding(
            FIX, "lambda",
            f"SlicerReservedConcurrency={reserved} would leave {unreserved - reserved} unreserved executions and "
            f"Lambda keeps at least {LAMBDA_UNRESERVED_MINIMUM}: the deploy fails. Leave it empty (the event "
            f"source's cap already bounds the slicer) or ask for {ask} "
            f"concurrent executions ({LAMBDA_CONCURRENCY_QUOTA})",
        ))  # fmt: skip
    return findings


# ---------------------------------------------------------------- the GPU fleet


def instance_vcpus(ec2: Any, instance_types: Sequence[str]) -> dict[str, int]:
    described = ec2.describe_instance_types(InstanceTypes=list(instance_types))["InstanceTypes"]
    return {item["InstanceType"]: int(item["VCpuInfo"]["DefaultVCpus"]) for item in described}


def fleet_vcpus(plan: DeployPlan, vcpus: int) -> tuple[int, int]:
    """(On-Demand, Spot) vCPUs of a full fleet: GpuMaxInstances hosts of `vcpus` each, On-Demand rounded up
    as Auto Scaling rounds its On-Demand share."""
    on_demand_hosts = math.ceil(plan.gpu_max_instances * plan.on_demand_percentage / 100)
    return on_demand_hosts * vcpus, (plan.gpu_max_instances - on_demand_hosts) * vcpus


def _quota_value(quotas: Any, code: str) -> float:
    try:
        response = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)
    except quotas.exceptions.NoSuchResourceException:  # nothing applied: the default holds
        response = quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)
    return float(response["Quota"]["Value"])


def check_fleet_quota(quotas: Any, ec2: Any, plan: DeployPlan, region: str) -> list[Finding]:
    """The G and VT vCPU quotas against GpuMaxInstances hosts of the largest instance type (the fleet
    may launch either type): below it the capacity provider stops short of the fleet the stack allows
    (the one-host check, gpu quota, says whether it can start at all)."""
    try:
        sizes = instance_vcpus(ec2, plan.instance_types)
    except _FAILURES as error:
        return [_unreadable("gpu fleet", "ec2:DescribeInstanceTypes", error)]
    largest = max(sizes.values())
    on_demand, spot = fleet_vcpus(plan, largest)
    findings = []
    for market, code, need in (("On-Demand", ON_DEMAND_QUOTA, on_demand), ("Spot", SPOT_QUOTA, spot)):
        if need == 0:
            continue
        try:
            quota = _quota_value(quotas, code)
        except Exception as error:  # any failure to read (as the slicer's own check): said, never a crash
            findings.append(_unreadable("gpu fleet", "servicequotas:GetServiceQuota", error))
            continue
        fleet = f"GpuMaxInstances={plan.gpu_max_instances} × {largest} vCPUs ({market} share {need})"
        if quota >= need:
            findings.append(Finding(OK, "gpu fleet", f"{market} G and VT quota {quota:g} vCPUs covers {fleet}"))
            continue
        hosts = int(quota // largest)
        findings.append(Finding(
            FIX, "gpu fleet",
            f"{market} G and VT quota ({code}) is {quota:g} vCPUs in {region}, {fleet}: the fleet stops at {hosts} "
            f"host(s). Ask for {need} vCPUs in Service Quotas, or deploy with a GpuMaxInstances the quota allows",
        ))  # fmt: skip
    return findings


def check_instance_offerings(ec2: Any, plan: DeployPlan) -> list[Finding]:
    """Each subnet's Availability Zone offers the GPU instance types (DescribeInstanceTypeOfferings):
    Auto Scaling cannot launch a type in a zone that lacks it, and a subnet whose zone offers none of
    them never gets a host."""
    if not plan.subnets:
        return []
    try:
        subnets = ec2.describe_subnets(SubnetIds=list(plan.subnets))["Subnets"]
        zones = sorted({s["AvailabilityZone"] for s in subnets})
        offered: dict[str, set[str]] = {zone: set() for zone in zones}
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": list(plan.instance_types)},
                     {"Name": "location", "Values": zones}],
        )  # fmt: skip
        for page in pages:
            for offering in page["InstanceTypeOfferings"]:
                offered.setdefault(offering["Location"], set()).add(offering["InstanceType"])
    except _FAILURES as error:
        return [_unreadable("instance type", "ec2:DescribeInstanceTypeOfferings", error)]
    findings = []
    for subnet in subnets:
        zone = subnet["AvailabilityZone"]
        there = [t for t in plan.instance_types if t in offered.get(zone, set())]
        missing = [t for t in plan.instance_types if t not in there]
        where = f"{subnet['SubnetId']} ({zone})"
        if not there:
            others = sorted(z for z, types in offered.items() if types)
            findings.append(Finding(
                FIX, "instance type",
                f"{where} offers none of {', '.join(plan.instance_types)}: no host ever starts there. Use subnets in "
                f"a zone that does{' (' + ', '.join(others) + ')' if others else ''}, or another instance type",
            ))  # fmt: skip
        elif missing:
            findings.append(Finding(OK, "instance type", f"{where}: {', '.join(there)} (not {', '.join(missing)})"))
        else:
            findings.append(Finding(OK, "instance type", f"{where}: {', '.join(there)}"))
    return findings


# ---------------------------------------------------------------- the VPC the endpoints go into


def check_endpoint_vpc(ec2: Any, plan: DeployPlan, region: str) -> list[Finding]:
    """With CreateVpcEndpoints=true, what the endpoints' creation needs of the VPC: DNS support and
    hostnames (private DNS names), subnets in distinct zones (an interface endpoint takes one subnet per
    zone), and no endpoint of the VPC already holding a service's private DNS name (a second one is
    refused: "conflicting DNS domain")."""
    if not plan.vpc_endpoints or not plan.subnets:
        return []
    try:
        subnets = ec2.describe_subnets(SubnetIds=list(plan.subnets))["Subnets"]
        vpcs = sorted({s["VpcId"] for s in subnets})
        attributes = {
            (vpc, name): bool(ec2.describe_vpc_attribute(VpcId=vpc, Attribute=name)[key]["Value"])
            for vpc in vpcs
            for name, key in (("enableDnsSupport", "EnableDnsSupport"), ("enableDnsHostnames", "EnableDnsHostnames"))
        }
        endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": vpcs}])["VpcEndpoints"]
    except _FAILURES as error:
        return [_unreadable("vpc", "ec2:DescribeVpcAttribute, ec2:DescribeVpcEndpoints", error)]
    findings = []
    for vpc in vpcs:
        off = [name for (v, name), on in attributes.items() if v == vpc and not on]
        if off:
            flags = " ".join(_FLAGS[name] for name in off)
            findings.append(Finding(
                FIX, "vpc",
                f"{vpc} has {' and '.join(off)} off: the endpoints' private DNS names cannot be created. "
                f"Turn them on: aws ec2 modify-vpc-attribute --vpc-id {vpc} {flags} (one attribute a call)",
            ))  # fmt: skip
        else:
            findings.append(Finding(OK, "vpc", f"{vpc}: DNS support and hostnames on"))
    findings += _zones(subnets)
    findings += _conflicting_endpoints(endpoints, region, plan)
    return findings


def _zones(subnets: list[dict[str, Any]]) -> list[Finding]:
    by_zone: dict[str, list[str]] = {}
    for subnet in subnets:
        by_zone.setdefault(subnet["AvailabilityZone"], []).append(subnet["SubnetId"])
    shared = {zone: ids for zone, ids in by_zone.items() if len(ids) > 1}
    if shared:
        named = "; ".join(f"{', '.join(ids)} in {zone}" for zone, ids in sorted(shared.items()))
        return [Finding(FIX, "vpc", f"{named}: an interface endpoint takes one subnet per zone and its creation "
                                    "fails; name one subnet of each zone in SubnetIds")]  # fmt: skip
    if len(by_zone) < 2:
        zone = next(iter(by_zone), "?")
        return [Finding(CHECK, "vpc", f"every subnet is in {zone}: the endpoints and the fleet then stand in one "
                                      "zone; name subnets of two zones to survive its outage")]  # fmt: skip
    return [Finding(OK, "vpc", f"subnets in {len(by_zone)} zones ({', '.join(sorted(by_zone))}), one each")]


def _conflicting_endpoints(endpoints: list[dict[str, Any]], region: str, plan: DeployPlan) -> list[Finding]:
    findings = []
    for endpoint in endpoints:
        if str(endpoint.get("State", "available")).lower() in ("deleted", "deleting", "rejected", "failed"):
            continue
        service = str(endpoint.get("ServiceName", "")).removeprefix(f"com.amazonaws.{region}.")
        if service not in ENDPOINT_SERVICES:
            continue
        ident = endpoint.get("VpcEndpointId", "?")
        if endpoint.get("VpcEndpointType") == "Gateway":
            overlap = sorted(set(endpoint.get("RouteTableIds", [])) & set(plan.route_tables))
            if overlap or not plan.route_tables:
                on = ", ".join(overlap) if overlap else "the subnets' route tables, if they are the ones it serves"
                findings.append(Finding(
                    FIX if overlap else CHECK, "vpc",
                    f"{ident} is already an S3 gateway endpoint on {on}: a second one there is refused (a route to "
                    "S3's prefix list exists). Leave those route tables out of RouteTableIds",
                ))  # fmt: skip
        elif endpoint.get("PrivateDnsEnabled"):
            findings.append(Finding(
                FIX, "vpc",
                f"{ident} already serves {service}'s private DNS name in {endpoint.get('VpcId')}: the stack's own is "
                "refused (conflicting DNS domain). Deploy with CreateVpcEndpoints=false (the existing endpoints "
                "serve the hosts if every service has one) or delete the existing ones",
            ))  # fmt: skip
    return findings


def account_checks(clients: dict[str, Any], plan: DeployPlan, region: str, caps: Sequence[int]) -> list[Finding]:
    """Every check of this module, in the order a deploy meets what they check."""
    steps: list[Callable[[], list[Finding]]] = [
        lambda: check_fleet_quota(clients["service-quotas"], clients["ec2"], plan, region),
        lambda: check_instance_offerings(clients["ec2"], plan),
        lambda: check_endpoint_vpc(clients["ec2"], plan, region),
        lambda: check_lambda_concurrency(clients["lambda"], plan, caps),
        lambda: check_cloudfront(clients["cloudfront"], plan, region),
    ]
    return [finding for step in steps for finding in step()]


def template_text() -> str | None:
    """template.yaml of the checkout the CLI runs from, or None outside one."""
    from fleetctl.local.paths import project_root

    try:
        return (project_root() / "template.yaml").read_text()
    except (FileNotFoundError, OSError):
        return None


def stack_caps(template: str | None, values: dict[str, str]) -> list[int]:
    """The event sources' caps for these parameter values (the template's defaults where unset)."""
    if template is None:
        return []
    names = {parameter for _number, parameter in _MAXIMUM_CONCURRENCY.findall(template) if parameter}
    parameters = {**template_defaults(template, names), **{k: v for k, v in values.items() if k in names and v}}
    return event_source_concurrency(template, parameters)
