"""`python -m fleetctl.dashboard --port P`: the dashboard of one stack, served on 127.0.0.1.

The local stack starts it as its `dashboard` process (`fusionfleet local up --dashboard-port`); it can
also be run by hand against any stack the CLI reaches (same flags and variables as `fusionfleet`).
Prints its URL on standard output once it listens.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from types import FrameType

from fleetctl import admission, connection
from fleetctl.dashboard.server import DashboardServer
from fleetctl.dashboard.source import StackSource
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.settings import FUSIONFLEET_ENDPOINT_URL, FUSIONFLEET_STACK
from fusionfleet.jobs.reader import JobReader

logger = logging.getLogger("fleetctl.dashboard")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fleetctl.dashboard", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--endpoint-url", help=f"AWS endpoint (LocalStack); env {FUSIONFLEET_ENDPOINT_URL}")
    parser.add_argument("--region", help="AWS region; env AWS_REGION")
    parser.add_argument("--stack", help=f"stack name (default {connection.DEFAULT_STACK}); env {FUSIONFLEET_STACK}")
    return parser


def _stop(_number: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    conn = connection.resolve(args.endpoint_url, args.region, args.stack, env=os.environ)
    storage, orchestrator = S3Storage(conn.aws.client("s3")), StepFunctions(conn.aws.client("stepfunctions"))
    resources = conn.resources()
    reader = JobReader(storage, orchestrator, resources.work_bucket, resources.state_machine_arn)
    # Its retry admits a tenant's job at once with the stack's limits (fleetctl.admission).
    operations = admission.operations(conn, os.environ)
    server = DashboardServer(StackSource(reader, operations), args.port)
    signal.signal(signal.SIGTERM, _stop)
    logger.info("dashboard of stack %s on %s", conn.stack_name, server.url)
    print(server.url, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        logger.info("dashboard stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
