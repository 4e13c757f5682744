"""`fusionfleet aws preflight|teardown --stack NAME --region R`: before a deploy, the checks (printed; exit 1
while anything needs fixing); before a deletion, or while one waits, what lets it finish."""

from __future__ import annotations

import argparse
import os
from typing import Any

from fleetctl import connection
from fleetctl.preflight import teardown
from fleetctl.preflight.account import CHECK, account_checks, stack_caps, template_text
from fleetctl.preflight.checks import FIX, DeployPlan, preflight, stack_parameters


def add_parser(commands: Any, add_connection: Any) -> None:
    aws = commands.add_parser("aws", help="an AWS account and stack").add_subparsers(dest="aws_command", required=True)
    check = aws.add_parser(
        "preflight",
        help="before a deploy: GPU quota for one host and the whole fleet, service-linked roles (created when"
        " missing), the subnets' route to AWS and instance types, the endpoints' VPC, Lambda concurrency, CloudFront",
    )
    add_connection(check)
    check.add_argument("--instance-types", help="GPU instance types, comma-separated (default: the stack's, g5.xlarge)")
    check.add_argument("--on-demand-percentage", type=int, help="GpuOnDemandPercentage (default: the stack's, 100)")
    check.add_argument("--subnets", help="SubnetIds, comma-separated (default: the stack's)")
    check.add_argument("--assign-public-ip", choices=("ENABLED", "DISABLED"), help="AssignPublicIp (default: ENABLED)")
    check.add_argument("--vpc-endpoints", choices=("true", "false"), help="CreateVpcEndpoints (default: false)")
    check.add_argument("--gpu-max-instances", type=int, help="GpuMaxInstances (default: the stack's, 4)")
    down = aws.add_parser(
        "teardown",
        help="let a deletion or rollback finish: executions stopped, render and merge queues purged, services to 0,"
        " hosts' scale-in protection lifted, work and dashboard buckets emptied",
    )
    add_connection(down)
    down.add_argument("--keep-work", action="store_true", help="leave the work bucket's objects (deletion then waits)")


def run(args: argparse.Namespace) -> int:
    conn = connection.of_args(args, os.environ)
    if args.aws_command == "teardown":
        parts = teardown.stack_parts(conn.aws.client("cloudformation"), conn.stack_name)
        ecs, autoscaling, s3, stepfunctions, sqs = (
            conn.aws.client(name) for name in ("ecs", "autoscaling", "s3", "stepfunctions", "sqs")
        )
        teardown.teardown(
            parts, ecs, autoscaling, s3, say=lambda line: print(line, flush=True), empty_work=not args.keep_work,
            stepfunctions=stepfunctions, sqs=sqs,
        )  # fmt: skip
        print(f"{conn.stack_name}: nothing left that holds its deletion (the media bucket and keys are retained)")
        return 0
    region = conn.aws.region
    values = stack_parameters(conn.aws.client("cloudformation"), conn.stack_name)
    flags = {
        "GpuInstanceType": (args.instance_types or "").split(",")[0],
        "GpuInstanceTypeAlternative": ",".join((args.instance_types or "").split(",")[1:2]),
        "GpuOnDemandPercentage": "" if args.on_demand_percentage is None else str(args.on_demand_percentage),
        "SubnetIds": args.subnets or "",
        "AssignPublicIp": args.assign_public_ip or "",
        "CreateVpcEndpoints": args.vpc_endpoints or "",
        "GpuMaxInstances": "" if args.gpu_max_instances is None else str(args.gpu_max_instances),
    }
    values.update({key: value for key, value in flags.items() if value})
    if args.instance_types:
        values["GpuInstanceTypeAlternative"] = flags["GpuInstanceTypeAlternative"]
    plan = DeployPlan.from_parameters(values)
    clients = {name: conn.aws.client(name) for name in ("service-quotas", "ec2", "iam", "lambda", "cloudfront")}
    findings = preflight(clients, plan, region)
    findings += account_checks(clients, plan, region, stack_caps(template_text(), values))
    for finding in findings:
        print(finding.line(), flush=True)
    to_fix = [f for f in findings if f.status == FIX]
    by_hand = sum(f.status == CHECK for f in findings)
    tail = f"; {by_hand} to verify by hand (CHECK)" if by_hand else ""
    print(
        f"{len(findings)} checks, {len(to_fix)} to fix before deploying {conn.stack_name} in {region}{tail}", flush=True
    )
    return 1 if to_fix else 0
