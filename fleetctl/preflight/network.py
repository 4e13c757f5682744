"""Whether a subnet's GPU hosts and merge tasks reach what they call: ECR (the images), S3, SQS, Step
Functions, ECS and CloudWatch Logs. Pure: the route table and the VPC's endpoints in, a verdict out.

Three ways work: a NAT gateway (or NAT instance) on the default route; an internet gateway with public
IPs on the hosts and tasks (`AssignPublicIp=ENABLED`: the launch template and the merge service both
follow it); or VPC endpoints for every service (the template's `CreateVpcEndpoints=true`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# What the hosts, the ECS agent and the tasks call, as VPC endpoint service suffixes
# (com.amazonaws.<region>.<suffix>). S3 is a gateway endpoint; the others are interface endpoints with
# private DNS, so the SDKs' default names resolve to them.
ENDPOINT_SERVICES = ("ecr.api", "ecr.dkr", "s3", "sqs", "states", "logs", "ecs", "ecs-agent", "ecs-telemetry")
DEFAULT_ROUTE = "0.0.0.0/0"


@dataclass(frozen=True)
class SubnetReach:
    subnet: str
    ok: bool
    how: str  # how it reaches AWS, or what to fix


def subnet_reach(
    subnet: str, routes: Iterable[Mapping[str, Any]], endpoints: Iterable[Mapping[str, Any]], region: str,
    assign_public_ip: bool,
) -> SubnetReach:  # fmt: skip
    """The verdict for one subnet from its route table's routes and the VPC's endpoints (EC2's shapes)."""
    live = [r for r in routes if r.get("DestinationCidrBlock") == DEFAULT_ROUTE and r.get("State") != "blackhole"]
    default = live[0] if live else None
    if default is not None and (default.get("NatGatewayId") or default.get("InstanceId")):
        return SubnetReach(subnet, True, f"NAT ({default.get('NatGatewayId') or default.get('InstanceId')})")
    if default is not None and str(default.get("GatewayId", "")).startswith("igw-"):
        if assign_public_ip:
            return SubnetReach(subnet, True, f"internet gateway {default['GatewayId']} with public IPs")
        return SubnetReach(
            subnet, False,
            f"a public subnet (internet gateway {default['GatewayId']}) but AssignPublicIp=DISABLED: hosts and "
            "merge tasks get no public IP and reach nothing; deploy with AssignPublicIp=ENABLED, or use "
            "subnets with a NAT gateway",
        )  # fmt: skip
    missing = missing_endpoints(endpoints, region)
    if not missing:
        return SubnetReach(subnet, True, "VPC endpoints for every service")
    return SubnetReach(
        subnet, False,
        "no route to the internet (no NAT gateway or internet gateway on 0.0.0.0/0) and no VPC endpoint for "
        f"{', '.join(missing)}: deploy with CreateVpcEndpoints=true, or give the subnet a NAT gateway",
    )  # fmt: skip


def missing_endpoints(endpoints: Iterable[Mapping[str, Any]], region: str) -> list[str]:
    """The services of ENDPOINT_SERVICES with no usable endpoint (available; private DNS for interface ones)."""
    usable = set()
    for endpoint in endpoints:
        if str(endpoint.get("State", "available")).lower() != "available":
            continue
        name = str(endpoint.get("ServiceName", ""))
        suffix = name.removeprefix(f"com.amazonaws.{region}.")
        gateway = endpoint.get("VpcEndpointType") == "Gateway"
        if gateway or endpoint.get("PrivateDnsEnabled"):
            usable.add(suffix)
    return [service for service in ENDPOINT_SERVICES if service not in usable]
