"""Stand-in for an EventBridge schedule, for LocalStack without Docker: call a handler every N seconds.

Run: python infra/emulators/schedule.py --handler functions.watchdog.app.handler --every 10
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

logger = logging.getLogger("schedule")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--handler", required=True, help="module.function, e.g. functions.watchdog.app.handler")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between invocations")
    parser.add_argument("--name", default="schedule", help="this runner's name in logs and process lists")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from infra.emulators.event_source import LambdaContext

    module_name, _, function_name = args.handler.rpartition(".")
    handler = getattr(importlib.import_module(module_name), function_name)
    stopping = threading.Event()

    def stop(number: int, _frame: Any) -> None:
        logger.info("%s received, stopping", signal.Signals(number).name)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    logger.info("%s calling %s every %.0f s", args.name, args.handler, args.every)
    event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    while not stopping.is_set():
        context = LambdaContext(
            function_name=args.name, aws_request_id=str(uuid.uuid4()), deadline_ms=time.time() * 1000 + 60_000
        )
        try:
            handler(event, context)
        except Exception:
            # As a scheduled Lambda: this invocation fails, the next one comes on time.
            logger.exception("%s: the handler raised", args.name)
        stopping.wait(args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
