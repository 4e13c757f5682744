"""`fusionfleet aws preflight`: the subnets' reach against moto's EC2 (VPCs, route tables, gateways,
endpoints); the GPU quota and the service-linked roles through botocore's Stubber at the client, where
moto has no GetServiceQuota and names service-linked roles otherwise than AWS does."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from fleetctl import cli
from fleetctl.preflight.checks import (
    FIX,
    FIXED,
    OK,
    DeployPlan,
    check_quota,
    check_subnets,
    ensure_service_linked_roles,
)
from fleetctl.preflight.network import ENDPOINT_SERVICES
from fleetctl.preflight.teardown import StackParts, teardown
from tests.integration.conftest import REGION


def plan(subnets: tuple[str, ...] = (), public_ip: bool = False, spot: bool = False) -> DeployPlan:
    return DeployPlan(("g5.xlarge",), 50 if spot else 100, subnets, public_ip, vpc_endpoints=False)


def _subnet(ec2: Any, vpc: str, cidr: str, route: dict[str, str] | None) -> str:
    # A fixed zone: moto picks one at random otherwise, and us-east-1e offers no g5 (the instance-type check
    # rightly says FIX there, which made the count below depend on the draw)
    made = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=f"{REGION}a")
    subnet = str(made["Subnet"]["SubnetId"])
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=table, SubnetId=subnet)
    if route:
        ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", **route)
    return subnet


def test_each_subnet_is_told_how_it_reaches_aws_or_what_to_fix(ec2: Any) -> None:
    # GIVEN a public subnet (internet gateway), a NAT subnet, and a private one with no way out
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpc)
    public = _subnet(ec2, vpc, "10.1.1.0/24", {"GatewayId": gateway})
    allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=public, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
    behind_nat = _subnet(ec2, vpc, "10.1.2.0/24", {"NatGatewayId": nat})
    private = _subnet(ec2, vpc, "10.1.3.0/24", None)
    # WHEN the hosts get no public IP
    found = {f.detail.split(" ")[0]: f for f in check_subnets(ec2, plan((public, behind_nat, private)), REGION)}
    # THEN the public subnet must have public IPs, the NAT one is fine, the private one needs endpoints
    assert found[public].status == FIX and "AssignPublicIp=ENABLED" in found[public].detail
    assert found[behind_nat].status == OK and nat in found[behind_nat].detail
    assert found[private].status == FIX and "CreateVpcEndpoints=true" in found[private].detail
    assert all(service in found[private].detail for service in ENDPOINT_SERVICES)
    # AND with public IPs (the default) the public subnet works
    (again,) = check_subnets(ec2, plan((public,), public_ip=True), REGION)
    assert again.status == OK and gateway in again.detail


def test_a_private_subnet_with_every_endpoint_reaches_aws_and_one_missing_is_named(ec2: Any) -> None:
    vpc = ec2.create_vpc(CidrBlock="10.2.0.0/16")["Vpc"]["VpcId"]
    private = _subnet(ec2, vpc, "10.2.1.0/24", None)
    for service in ENDPOINT_SERVICES:
        if service == "ecr.dkr":
            continue
        gateway = service == "s3"
        ec2.create_vpc_endpoint(
            VpcId=vpc, ServiceName=f"com.amazonaws.{REGION}.{service}",
            VpcEndpointType="Gateway" if gateway else "Interface", PrivateDnsEnabled=not gateway,
        )  # fmt: skip
    (finding,) = check_subnets(ec2, plan((private,)), REGION)
    assert finding.status == FIX and "no VPC endpoint for ecr.dkr:" in finding.detail
    ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{REGION}.ecr.dkr", VpcEndpointType="Interface",
                            PrivateDnsEnabled=True)  # fmt: skip
    (finding,) = check_subnets(ec2, plan((private,)), REGION)
    assert finding.status == OK and "VPC endpoints" in finding.detail


def _quotas(on_demand: float) -> tuple[Any, Stubber]:
    quotas = boto3.client("service-quotas", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(quotas)
    stubber.add_response(
        "get_service_quota",
        {"Quota": {"QuotaCode": "L-DB2E81BA", "Value": on_demand}},
        {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"},
    )
    return quotas, stubber


def test_a_gpu_quota_too_small_for_one_host_is_named_with_its_code(ec2: Any) -> None:
    quotas, stubber = _quotas(0.0)
    with stubber:
        (finding,) = check_quota(quotas, ec2, plan(), REGION)
    assert finding.status == FIX and "L-DB2E81BA" in finding.detail and "0 vCPUs" in finding.detail
    quotas, stubber = _quotas(8.0)
    with stubber:
        (finding,) = check_quota(quotas, ec2, plan(), REGION)
    assert finding.status == OK and "On-Demand 8 vCPUs" in finding.detail and "needs 4" in finding.detail


def test_missing_service_linked_roles_are_created_and_existing_ones_left_alone() -> None:
    iam = boto3.client("iam", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(iam)
    role = {"Path": "/aws-service-role/", "RoleName": "r", "RoleId": "AROAEXAMPLEEXAMPLE1", "CreateDate": "2026-01-01",
            "Arn": "arn:aws:iam::123456789012:role/aws-service-role/x/r"}  # fmt: skip
    # ECS's exists; Auto Scaling's and Application Auto Scaling's do not; Spot's is asked for (Spot hosts)
    stubber.add_response("get_role", {"Role": role}, {"RoleName": "AWSServiceRoleForECS"})
    for name, service in (("AWSServiceRoleForAutoScaling", "autoscaling.amazonaws.com"),
                          ("AWSServiceRoleForApplicationAutoScaling_ECSService",
                           "ecs.application-autoscaling.amazonaws.com"),
                          ("AWSServiceRoleForEC2Spot", "spot.amazonaws.com")):  # fmt: skip
        stubber.add_client_error("get_role", "NoSuchEntity", http_status_code=404, expected_params={"RoleName": name})
        stubber.add_response("create_service_linked_role", {"Role": role}, {"AWSServiceName": service})
    with stubber:
        findings = ensure_service_linked_roles(iam, plan(spot=True))
    stubber.assert_no_pending_responses()
    assert [f.status for f in findings] == [OK, FIXED, FIXED, FIXED]
    assert "created AWSServiceRoleForEC2Spot" in findings[-1].detail


# ---------------------------------------------------------------- teardown


def test_teardown_lifts_host_protection_stops_the_services_and_empties_the_work_bucket() -> None:
    with mock_aws():
        clients: dict[str, Any] = {
            name: boto3.client(name, region_name=REGION) for name in ("ecs", "autoscaling", "s3")
        }
        ecs, autoscaling, s3 = clients["ecs"], clients["autoscaling"], clients["s3"]
        ec2 = boto3.client("ec2", region_name=REGION)
        # GIVEN a cluster whose render service wants a task, two GPU hosts protected from scale-in
        # (what managed termination protection leaves), and a work bucket with a job's files
        ecs.create_cluster(clusterName="fleet-cluster")
        ecs.register_task_definition(family="render", containerDefinitions=[{"name": "r", "image": "i", "memory": 64}])
        ecs.create_service(cluster="fleet-cluster", serviceName="fleet-render", taskDefinition="render", desiredCount=1)
        subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
        image = ec2.describe_images()["Images"][0]["ImageId"]
        ec2.create_launch_template(LaunchTemplateName="gpu", LaunchTemplateData={"ImageId": image})
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName="fleet-gpu", MinSize=0, MaxSize=4, DesiredCapacity=2, VPCZoneIdentifier=subnet,
            LaunchTemplate={"LaunchTemplateName": "gpu"}, NewInstancesProtectedFromScaleIn=True,
        )  # fmt: skip
        s3.create_bucket(Bucket="fleet-work")
        for key in ("work/j/plan.json", "work/j/segments/00000.mp4"):
            s3.put_object(Bucket="fleet-work", Key=key, Body=b"x")
        live, gone = "CREATE_COMPLETE", "DELETE_COMPLETE"
        parts = StackParts.from_resources([
            {"LogicalResourceId": logical, "PhysicalResourceId": physical, "ResourceStatus": status}
            for logical, physical, status in (
                ("RenderCluster", "fleet-cluster", live), ("RenderService", "fleet-render", live),
                ("MergeService", "gone", gone), ("GpuAutoScalingGroup", "fleet-gpu", live),
                ("WorkBucket", "fleet-work", live),
            )
        ])  # fmt: skip
        said: list[str] = []
        # WHEN the teardown runs
        teardown(parts, ecs, autoscaling, s3, said.append, stepfunctions=_client("stepfunctions"), sqs=_client("sqs"))
        # THEN no host is protected and the group wants none, the service wants no task, the bucket is empty
        (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["fleet-gpu"])["AutoScalingGroups"]
        assert group["DesiredCapacity"] == 0 and group["MinSize"] == 0
        assert not [i for i in group["Instances"] if i["ProtectedFromScaleIn"]]
        (service,) = ecs.describe_services(cluster="fleet-cluster", services=["fleet-render"])["services"]
        assert service["desiredCount"] == 0
        assert s3.list_objects_v2(Bucket="fleet-work").get("KeyCount", 0) == 0
        assert "scale-in protection lifted from 2 hosts" in " ".join(said), said
        assert parts.services == ("fleet-render",)


def _client(name: str) -> Any:
    return boto3.client(name, region_name=REGION)  # type: ignore[call-overload]


def _parts(**physical: str) -> StackParts:
    return StackParts.from_resources([
        {"LogicalResourceId": logical, "PhysicalResourceId": value, "ResourceStatus": "CREATE_COMPLETE"}
        for logical, value in physical.items()
    ])  # fmt: skip


def test_teardown_deletes_every_version_and_delete_marker_of_the_dashboard_bucket() -> None:
    with mock_aws():
        s3 = _client("s3")
        # GIVEN the versioned dashboard bucket after two publishes and a removed file (old versions and a
        # delete marker: CloudFormation's deletion of a bucket holding any of them ends in DELETE_FAILED)
        s3.create_bucket(Bucket="fleet-dashboard")
        s3.put_bucket_versioning(Bucket="fleet-dashboard", VersioningConfiguration={"Status": "Enabled"})
        for body in (b"v1", b"v2"):
            s3.put_object(Bucket="fleet-dashboard", Key="index.html", Body=body)
            s3.put_object(Bucket="fleet-dashboard", Key="config.json", Body=body)
        s3.delete_object(Bucket="fleet-dashboard", Key="config.json")
        said: list[str] = []
        # WHEN the teardown runs
        teardown(_parts(DashboardBucket="fleet-dashboard"), _client("ecs"), _client("autoscaling"), s3, said.append,
                 stepfunctions=_client("stepfunctions"), sqs=_client("sqs"))  # fmt: skip
        # THEN no version and no delete marker is left, and the bucket can be deleted
        left = s3.list_object_versions(Bucket="fleet-dashboard")
        assert left.get("Versions", []) == [] and left.get("DeleteMarkers", []) == []
        s3.delete_bucket(Bucket="fleet-dashboard")
        assert "dashboard bucket fleet-dashboard: 5 versions and delete markers deleted" in said, said


def test_teardown_stops_running_executions_and_purges_the_render_and_merge_queues() -> None:
    with mock_aws():
        sfn, sqs = _client("stepfunctions"), _client("sqs")
        # GIVEN a state machine with two executions waiting on task tokens (one already finished), and the
        # render and merge queues holding their messages
        role = _client("iam").create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        definition = '{"StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 3600, "End": true}}}'
        machine = sfn.create_state_machine(name="fleet-render", definition=definition, roleArn=role)
        executions = [sfn.start_execution(stateMachineArn=machine["stateMachineArn"], name=f"job-{n}")
                      for n in range(3)]  # fmt: skip
        sfn.stop_execution(executionArn=executions[2]["executionArn"])
        queues = {name: sqs.create_queue(QueueName=f"fleet-{name}")["QueueUrl"]
                  for name in ("RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow", "MergeQueue")}  # fmt: skip
        for url in queues.values():
            sqs.send_message(QueueUrl=url, MessageBody='{"token": "t"}')
        said: list[str] = []
        # WHEN the teardown runs
        parts = _parts(RenderStateMachine=machine["stateMachineArn"], **queues)
        teardown(parts, _client("ecs"), _client("autoscaling"), _client("s3"), said.append, stepfunctions=sfn, sqs=sqs)
        # THEN no execution runs (the state machine's deletion waits on none) and every queue is empty
        running = sfn.list_executions(stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING")
        assert running["executions"] == []
        for url in queues.values():
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0", url
        assert "state machine fleet-render: 2 running executions stopped" in said, said
        assert sum(line.endswith(": purged") for line in said) == 4, said


@pytest.mark.usefixtures("not_local")
def test_the_teardown_command_finds_the_stacks_parts_and_empties_the_dashboard_and_the_queues(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with mock_aws():
        # GIVEN a stack with a versioned dashboard bucket holding a published page and a merge queue with a message
        template = {
            "Resources": {
                "DashboardBucket": {"Type": "AWS::S3::Bucket",
                                    "Properties": {"VersioningConfiguration": {"Status": "Enabled"}}},
                "MergeQueue": {"Type": "AWS::SQS::Queue"},
            }
        }  # fmt: skip
        _client("cloudformation").create_stack(StackName="fleet", TemplateBody=json.dumps(template))
        resources = _client("cloudformation").list_stack_resources(StackName="fleet")["StackResourceSummaries"]
        physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}
        s3, sqs = _client("s3"), _client("sqs")
        # (moto's CloudFormation leaves a bucket's versioning off)
        s3.put_bucket_versioning(Bucket=physical["DashboardBucket"], VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket=physical["DashboardBucket"], Key="index.html", Body=b"page")
        s3.put_object(Bucket=physical["DashboardBucket"], Key="index.html", Body=b"page again")
        sqs.send_message(QueueUrl=physical["MergeQueue"], MessageBody="{}")
        # WHEN `fusionfleet aws teardown` runs against it
        code = cli.main(["aws", "teardown", "--region", REGION, "--stack", "fleet"])
        # THEN both versions are gone and the queue is empty
        assert code == 0
        assert s3.list_object_versions(Bucket=physical["DashboardBucket"]).get("Versions", []) == []
        depth = sqs.get_queue_attributes(
            QueueUrl=physical["MergeQueue"], AttributeNames=["ApproximateNumberOfMessages"]
        )
        assert depth["Attributes"]["ApproximateNumberOfMessages"] == "0"
    out = capsys.readouterr().out
    assert "2 versions and delete markers deleted" in out and ": purged" in out, out


@pytest.mark.usefixtures("not_local")
def test_the_command_reads_the_flags_checks_everything_and_exits_1_while_something_needs_fixing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.3.0.0/16")["Vpc"]["VpcId"]
        private = _subnet(ec2, vpc, "10.3.1.0/24", None)
        # WHEN preflight runs before a first deploy (no stack yet) for a private subnet without endpoints
        code = cli.main(["aws", "preflight", "--region", REGION, "--stack", "fresh", "--subnets", private])
    out = capsys.readouterr().out.splitlines()
    # THEN it reports each check (moto answers no quota: unreadable is a FIX too), creates the linked
    # roles, names the subnet's missing way out, and says how many need fixing
    assert code == 1
    assert any(line.startswith("FIX    gpu quota") for line in out), out
    assert sum(line.startswith("FIXED  linked role") for line in out) == 3, out
    assert any(line.startswith(f"FIX    subnets        {private}") for line in out), out
    # (the account checks add the fleet's quota and Lambda's concurrency, which moto cannot answer either,
    # and CloudFront in an account with no distribution: tests/integration/test_preflight_account.py)
    assert out[-1] == f"{len(out) - 1} checks, 4 to fix before deploying fresh in {REGION}; 1 to verify by hand (CHECK)"
