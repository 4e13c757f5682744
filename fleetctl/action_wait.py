"""`cancel --wait` and `retry --wait`: the action, then the job (or batch) followed to its end.

`retry --wait` is `wait` after the retry: the result downloaded (-o/--output-dir), `wait`'s exit status.
`cancel --wait` follows the job until it reads CANCELLED (exit 0); a job that ended otherwise first (it
succeeded before the cancel took hold) is said and exits 1; --timeout passing first exits 4, the cancel
going on. Either goes through the tenant API where the action did (--api), else the stack itself."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fleetctl import api_commands
from fleetctl.api_client import ApiClient, ended
from fleetctl.batch_commands import batch_client_of, is_batch_id
from fleetctl.exits import Exit, of_state
from fleetctl.job_commands import client_of, say
from fleetctl.submit_commands import DEFAULT_WAIT_S
from fusionfleet.jobs.states import JobState, parse_state
from fusionfleet.progress import ProgressLine

POLL_S = 2.0


def add_arguments(parser: argparse.ArgumentParser, downloads: bool) -> None:
    """--wait and --timeout (and, where the job ends with a result, where it goes)."""
    what = (
        "follow the job to its end and download its result, as `wait` does"
        if downloads
        else ("follow the job until it reads CANCELLED")
    )
    parser.add_argument("--wait", action="store_true", help=what)
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_WAIT_S, metavar="S",
        help=f"with --wait: seconds to wait before giving up with exit status 4 (default {DEFAULT_WAIT_S:.0f})",
    )  # fmt: skip
    if downloads:
        parser.add_argument(
            "-o", "--output", type=Path, metavar="FILE", help="with --wait: where the job's result goes"
        )
        parser.add_argument(
            "--output-dir", type=Path, help="with --wait: the folder the result goes into, under its own name"
        )


def note_unused_output(args: argparse.Namespace) -> None:
    """A retry naming where its result goes without --wait writes nothing: said, as `submit` says it."""
    named = getattr(args, "output", None) or getattr(args, "output_dir", None)
    if args.command == "retry" and named is not None and not args.wait:
        say(f"note: nothing is written to {named} without --wait: `fusionfleet wait {args.job_id} -o {named}`")


def follow_up(args: argparse.Namespace, run_wait: Callable[[argparse.Namespace], int]) -> int:
    """After a cancel or retry that did what it was asked (exit 0), what --wait asks for."""
    sys.stdout.flush()  # the action's own line (stdout) before the wait's progress (stderr), piped too
    if args.command == "retry":
        return run_wait(argparse.Namespace(**{**vars(args), "command": "wait"}))
    state = _cancelled_state(args)
    if state is None:
        say(f"gave up waiting: {args.job_id} has not ended after {args.timeout:.0f} s; the cancel goes on")
        return Exit.GAVE_UP
    if state is JobState.CANCELLED:
        say(f"{args.job_id}: cancelled")
        return Exit.DONE
    say(f"{args.job_id} ended {state} before the cancel took hold")
    code = of_state(state)
    return Exit.FAILED if code is Exit.DONE else code


def _cancelled_state(args: argparse.Namespace) -> JobState | None:
    """The job's state once it has ended (None: --timeout passed first), one progress line meanwhile."""
    read = _reader(args)
    line = ProgressLine()
    deadline = time.monotonic() + args.timeout
    try:
        while True:
            state, over = read()
            line.show(f"{args.job_id} {state}")
            if over or time.monotonic() > deadline:
                return state if over else None
            time.sleep(POLL_S)
    finally:
        line.done()


def _reader(args: argparse.Namespace) -> Callable[[], tuple[JobState, bool]]:
    """How to read the job's state and whether it ended: through the API, a batch's detail, or the job's view."""
    api = api_commands.api_of(args)
    if api is not None:
        return lambda: _through_api(api, args.job_id)
    if is_batch_id(args, args.job_id):
        batches = batch_client_of(args)

        def read_batch() -> tuple[JobState, bool]:
            batch = batches.detail(args.job_id).batch
            return batch.state, batch.ended

        return read_batch
    client = client_of(args)

    def read_job() -> tuple[JobState, bool]:
        view = client.status(args.job_id)
        return view.state, view.ended

    return read_job


def _through_api(api: ApiClient, job_id: str) -> tuple[JobState, bool]:
    job = api.call("GET", f"/jobs/{job_id}")
    return parse_state(str(job.get("state"))) or JobState.PENDING, ended(job)
