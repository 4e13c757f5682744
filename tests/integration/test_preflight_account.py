"""`fusionfleet aws preflight`'s account checks (fleetctl/preflight/account.py, issue 45).

moto answers what it implements: EC2's DescribeInstanceTypes, DescribeInstanceTypeOfferings (its data
has no g5.xlarge in us-east-1e, as AWS), DescribeSubnets, DescribeVpcAttribute, DescribeVpcEndpoints, and
CloudFront's ListDistributions. Where it does not (Lambda's GetAccountSettings: "Not yet implemented";
Service Quotas' GetServiceQuota for ec2: "not available in the current Region"), botocore's Stubber
answers at the client with AWS's shapes.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from fleetctl import cli
from fleetctl.preflight.account import (
    CHECK,
    check_cloudfront,
    check_endpoint_vpc,
    check_fleet_quota,
    check_instance_offerings,
    check_lambda_concurrency,
    event_source_concurrency,
    stack_caps,
    template_defaults,
    template_text,
)
from fleetctl.preflight.checks import FIX, OK, DeployPlan
from tests.integration.conftest import REGION
from tests.support.cfn import Conditions, existing, parameter_values, transform


def plan(**changes: Any) -> DeployPlan:
    values: dict[str, Any] = {
        "instance_types": ("g5.xlarge",), "on_demand_percentage": 100, "subnets": (), "assign_public_ip": True,
        "vpc_endpoints": False,
    }  # fmt: skip
    values.update(changes)
    return DeployPlan(**values)


def _stubbed(service: str) -> tuple[Any, Stubber]:
    factory: Any = boto3.client  # the service named at run time
    client = factory(service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    return client, Stubber(client)


# ---------------------------------------------------------------- the GPU fleet


def _quotas(values: dict[str, float]) -> tuple[Any, Stubber]:
    quotas, stubber = _stubbed("service-quotas")
    for code, value in values.items():
        stubber.add_response(
            "get_service_quota",
            {"Quota": {"QuotaCode": code, "Value": value}},
            {"ServiceCode": "ec2", "QuotaCode": code},
        )
    return quotas, stubber


def test_the_whole_fleets_vcpus_are_held_to_each_markets_quota(ec2: Any) -> None:
    # GIVEN 4 hosts of up to g5.2xlarge (8 vCPUs; the larger type counts), half of them Spot
    fleet = plan(instance_types=("g5.xlarge", "g5.2xlarge"), on_demand_percentage=50, gpu_max_instances=4)
    # WHEN the account allows 16 On-Demand vCPUs and 8 Spot ones
    quotas, stubber = _quotas({"L-DB2E81BA": 16.0, "L-3819A6DF": 8.0})
    with stubber:
        found = check_fleet_quota(quotas, ec2, fleet, REGION)
    stubber.assert_no_pending_responses()
    # THEN On-Demand (2 hosts × 8 = 16) is covered and Spot (16) is not: the fleet stops at one Spot host
    assert [f.status for f in found] == [OK, FIX]
    assert "L-3819A6DF" in found[1].detail and "is 8 vCPUs" in found[1].detail and "Ask for 16" in found[1].detail
    assert "stops at 1 host(s)" in found[1].detail


def test_a_quota_for_one_host_but_not_the_fleet_is_a_fix(ec2: Any) -> None:
    # GIVEN the defaults' fleet (4 g5.xlarge On-Demand, 16 vCPUs) and a quota of 8
    quotas, stubber = _quotas({"L-DB2E81BA": 8.0})
    with stubber:
        (finding,) = check_fleet_quota(quotas, ec2, plan(), REGION)
    # THEN it says how far the fleet gets and what to ask for
    assert finding.status == FIX and "stops at 2 host(s)" in finding.detail and "Ask for 16" in finding.detail
    quotas, stubber = _quotas({"L-DB2E81BA": 16.0})
    with stubber:
        (finding,) = check_fleet_quota(quotas, ec2, plan(), REGION)
    assert finding.status == OK


def test_a_subnet_in_a_zone_without_the_instance_type_is_named(ec2: Any) -> None:
    # GIVEN a subnet in us-east-1a (g5 offered) and one in us-east-1e (no g5 there)
    vpc = ec2.create_vpc(CidrBlock="10.4.0.0/16")["Vpc"]["VpcId"]
    good = ec2.create_subnet(VpcId=vpc, CidrBlock="10.4.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    bad = ec2.create_subnet(VpcId=vpc, CidrBlock="10.4.2.0/24", AvailabilityZone="us-east-1e")["Subnet"]["SubnetId"]
    # WHEN the offerings are checked
    found = {f.detail.split(" ")[0]: f for f in check_instance_offerings(ec2, plan(subnets=(good, bad)))}
    # THEN the first is fine and the second is a FIX naming the zone that does offer it
    assert found[good].status == OK and "g5.xlarge" in found[good].detail
    assert found[bad].status == FIX and "us-east-1e" in found[bad].detail and "us-east-1a" in found[bad].detail


# ---------------------------------------------------------------- the endpoints' VPC


def test_vpc_endpoints_need_dns_distinct_zones_and_no_endpoint_of_their_own_already(ec2: Any) -> None:
    # GIVEN a new VPC (DNS hostnames off, as EC2 creates one), two subnets in one zone, and an SQS endpoint
    # with private DNS already there
    vpc = ec2.create_vpc(CidrBlock="10.5.0.0/16")["Vpc"]["VpcId"]
    one = ec2.create_subnet(VpcId=vpc, CidrBlock="10.5.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    two = ec2.create_subnet(VpcId=vpc, CidrBlock="10.5.2.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    existing_sqs = ec2.create_vpc_endpoint(
        VpcId=vpc, ServiceName=f"com.amazonaws.{REGION}.sqs", VpcEndpointType="Interface", SubnetIds=[one],
        PrivateDnsEnabled=True,
    )["VpcEndpoint"]["VpcEndpointId"]  # fmt: skip
    # WHEN the stack would create its endpoints there
    found = check_endpoint_vpc(ec2, plan(subnets=(one, two), vpc_endpoints=True), REGION)
    fixes = [f.detail for f in found if f.status == FIX]
    # THEN each problem is a FIX with what to do
    assert any("enableDnsHostnames" in d and "--enable-dns-hostnames" in d for d in fixes), fixes
    assert any(one in d and two in d and "one subnet per zone" in d for d in fixes), fixes
    assert any(existing_sqs in d and "conflicting DNS domain" in d for d in fixes), fixes
    # AND with DNS on, subnets in two zones and no endpoint of its own, every line is OK
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    ec2.delete_vpc_endpoints(VpcEndpointIds=[existing_sqs])
    three = ec2.create_subnet(VpcId=vpc, CidrBlock="10.5.3.0/24", AvailabilityZone="us-east-1b")["Subnet"]["SubnetId"]
    again = check_endpoint_vpc(ec2, plan(subnets=(one, three), vpc_endpoints=True), REGION)
    assert [f.status for f in again] == [OK, OK], again
    # AND without CreateVpcEndpoints nothing of this is asked
    assert check_endpoint_vpc(ec2, plan(subnets=(one, two)), REGION) == []


# ---------------------------------------------------------------- Lambda


def _account(limit: int, unreserved: int) -> tuple[Any, Stubber]:
    client, stubber = _stubbed("lambda")
    stubber.add_response(
        "get_account_settings",
        {"AccountLimit": {"ConcurrentExecutions": limit, "UnreservedConcurrentExecutions": unreserved},
         "AccountUsage": {"FunctionCount": 0}},
    )  # fmt: skip
    return client, stubber


def test_a_new_accounts_ten_executions_are_fewer_than_the_event_sources_may_take() -> None:
    # GIVEN the template's caps (the slicer's 5 and four dead-letter or event sources at 2)
    caps = stack_caps(template_text(), {})
    assert sorted(caps) == [2, 2, 2, 2, 5]
    # WHEN the account has a new account's 10
    client, stubber = _account(10, 10)
    with stubber:
        (finding,) = check_lambda_concurrency(client, plan(), caps)
    # THEN it needs 15 (13 and the API and watchdog) and says where to ask
    assert finding.status == FIX and "Ask for at least 15" in finding.detail and "L-B99A9384" in finding.detail
    # AND 1000 is plenty
    client, stubber = _account(1000, 1000)
    with stubber:
        (finding,) = check_lambda_concurrency(client, plan(), caps)
    assert finding.status == OK


def test_a_slicer_reservation_that_leaves_lambda_fewer_than_100_unreserved_fails_before_the_deploy() -> None:
    client, stubber = _account(150, 150)
    with stubber:
        found = check_lambda_concurrency(client, plan(slicer_reserved_concurrency=60), [5, 2])
    assert [f.status for f in found] == [OK, FIX]
    assert "leave 90 unreserved" in found[1].detail and "ask for 160" in found[1].detail


def test_the_caps_are_read_as_the_transformed_template_has_them() -> None:
    # GIVEN the prod stage's event source mappings after the SAM transform
    template = transform("prod")
    conditions = Conditions(template, parameter_values(template, "prod"))
    mappings = [r for r in existing(template, conditions).values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    expected = []
    for mapping in mappings:
        cap = mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"]
        expected.append(int(parameter_values(template, "prod")[cap["Ref"]]) if isinstance(cap, dict) else int(cap))
    # THEN the preflight's reading of template.yaml finds the same caps, and a parameter's value counts
    text = template_text()
    assert text is not None
    assert sorted(stack_caps(text, {})) == sorted(expected)
    assert sorted(stack_caps(text, {"SlicerMaxConcurrency": "9"})) == [2, 2, 2, 2, 9]
    assert template_defaults(text, ["SlicerMaxConcurrency"]) == {"SlicerMaxConcurrency": "5"}
    assert event_source_concurrency("  MaximumConcurrency: 3\n", {}) == [3]


# ---------------------------------------------------------------- CloudFront


def test_cloudfront_is_ok_with_a_distribution_and_to_check_by_hand_without() -> None:
    with mock_aws():
        cloudfront = boto3.client("cloudfront", region_name=REGION)
        # GIVEN an account with no distribution: what a new, perhaps unverified, account looks like
        (finding,) = check_cloudfront(cloudfront, plan(), REGION)
        assert finding.status == CHECK and "CreateDashboardDistribution=false" in finding.detail
        # WHEN it has one THEN it may create another
        cloudfront.create_distribution(
            DistributionConfig={
                "CallerReference": "x", "Comment": "", "Enabled": False,
                "Origins": {"Quantity": 1, "Items": [{"Id": "o", "DomainName": "example.com",
                                                      "CustomOriginConfig": {"HTTPPort": 80, "HTTPSPort": 443,
                                                                             "OriginProtocolPolicy": "https-only"}}]},
                "DefaultCacheBehavior": {"TargetOriginId": "o", "ViewerProtocolPolicy": "allow-all",
                                         "MinTTL": 0, "ForwardedValues": {"QueryString": False,
                                                                          "Cookies": {"Forward": "none"}}},
            }
        )  # fmt: skip
        (finding,) = check_cloudfront(cloudfront, plan(), REGION)
        assert finding.status == OK
    # AND nothing is asked where the stack creates none
    assert check_cloudfront(None, plan(dashboard_distribution=False), REGION)[0].status == OK
    assert check_cloudfront(None, plan(), "us-gov-west-1")[0].status == OK


def test_cloudfront_refused_to_these_credentials_is_a_fix() -> None:
    cloudfront, stubber = _stubbed("cloudfront")
    stubber.add_client_error("list_distributions", "AccessDenied", http_status_code=403)
    with stubber:
        (finding,) = check_cloudfront(cloudfront, plan(), REGION)
    assert finding.status == FIX and "cloudfront:ListDistributions" in finding.detail


# ---------------------------------------------------------------- the command


@pytest.mark.usefixtures("not_local")
def test_the_command_prints_the_account_checks_and_counts_what_to_verify_by_hand(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.6.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.6.1.0/24", AvailabilityZone="us-east-1e")["Subnet"]
        code = cli.main(["aws", "preflight", "--region", REGION, "--stack", "fresh", "--subnets", subnet["SubnetId"],
                         "--gpu-max-instances", "2"])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    # moto has no GetAccountSettings: unreadable is a FIX naming the permission, as the quota's is
    assert any(line.startswith("FIX    lambda") and "lambda:GetAccountSettings" in line for line in out), out
    assert any(line.startswith("FIX    instance type") and "us-east-1e" in line for line in out), out
    assert any(line.startswith("CHECK  cloudfront") for line in out), out
    assert out[-1].endswith("; 1 to verify by hand (CHECK)"), out
